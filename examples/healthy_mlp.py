"""A healthy DDP training loop: an MLP on random data, N steps, step time measured on every rank.
Run it under plain torchrun and under `ddplab launch` to compare the step time (the overhead of
ddplab's boot module, heartbeat and flight-recorder polling).

    torchrun --nproc-per-node 2 examples/healthy_mlp.py --steps 200
    ddplab launch --nproc-per-node 2 -- examples/healthy_mlp.py --steps 200

Rank 0 prints one line `RESULT {json}` with the median and p90 step time in milliseconds.
"""

import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from _common import setup


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    rank, world_size, device = setup()
    torch.manual_seed(rank)
    mlp = torch.nn.Sequential(torch.nn.Linear(args.width, args.width), torch.nn.ReLU(),
                              torch.nn.Linear(args.width, args.width), torch.nn.ReLU(),
                              torch.nn.Linear(args.width, 10)).to(device)
    model = DistributedDataParallel(mlp, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    step_ms = []
    for step in range(args.warmup + args.steps):
        x = torch.randn(args.batch_size, args.width, device=device)
        y = torch.randint(0, 10, (args.batch_size,), device=device)
        synchronize(device)
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        synchronize(device)
        if step >= args.warmup:
            step_ms.append((time.perf_counter() - start) * 1e3)
    if rank == 0:
        quantiles = statistics.quantiles(step_ms, n=10)
        print("RESULT " + json.dumps({"world_size": world_size, "steps": args.steps, "device": device.type,
                                      "median_ms": statistics.median(step_ms), "p90_ms": quantiles[-1]}),
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
