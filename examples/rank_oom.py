"""A rank runs out of memory mid-training (one rank's batch is larger) while its peers wait in the
next all_reduce. On a GPU it asks for more device memory than there is; on the CPU it first caps
its own address space, as a container's memory limit would, then exceeds the cap.

    ddplab launch --nproc-per-node 2 --hang-timeout 30 -- examples/rank_oom.py
"""

import resource
import time

import torch
import torch.distributed as dist

from _common import announce, fault_arguments, finish, setup


def allocate_too_much(device: torch.device) -> torch.Tensor:
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return torch.empty(free + (1 << 30), dtype=torch.uint8, device=device)
    with open("/proc/self/statm") as f:
        mapped_bytes = int(f.read().split()[0]) * resource.getpagesize()
    cap = 256 << 20
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (mapped_bytes + cap, hard))
    return torch.empty(cap + (1 << 30), dtype=torch.uint8)


def main() -> None:
    args = fault_arguments(__doc__.splitlines()[0]).parse_args()
    rank, _, device = setup()
    grad = torch.ones(args.numel, device=device)
    for step in range(args.steps):
        time.sleep(args.interval)
        if rank == args.victim and step == args.fault_step:
            announce(rank, f"allocating more memory than this rank has at step {step}")
            activations = allocate_too_much(device)
            grad += activations[:1].float()
        dist.all_reduce(grad)
        grad.fill_(1.0)
    finish(rank, args.steps)


if __name__ == "__main__":
    main()
