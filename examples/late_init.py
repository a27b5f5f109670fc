"""A rank spends a long time before it joins the job (downloading its shard, say), so its peers
wait inside init_process_group for a rank that has not arrived.

    ddplab launch --nproc-per-node 2 --hang-timeout 30 -- examples/late_init.py
"""

import argparse
import os
import time

import torch
import torch.distributed as dist

from _common import announce, finish, setup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--victim", type=int, default=1)
    parser.add_argument("--sleep", type=float, default=600.0, help="seconds the victim spends before init")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    rank = int(os.environ["RANK"])
    if rank == args.victim:
        announce(rank, f"sleeping {args.sleep:.0f} s before init_process_group")
        time.sleep(args.sleep)
    else:
        print(f"[rank {rank}] joining the job at {time.time():.3f}", flush=True)
    rank, _, device = setup()
    grad = torch.ones(1024, device=device)
    for _ in range(args.steps):
        dist.all_reduce(grad)
    finish(rank, args.steps)


if __name__ == "__main__":
    main()
