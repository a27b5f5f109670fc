"""A rank raises in its own code (a bad sample in its shard) while its peers wait in the next
all_reduce for it.

    ddplab launch --nproc-per-node 2 --hang-timeout 30 -- examples/rank_exception.py
"""

import time

import torch
import torch.distributed as dist

from _common import announce, fault_arguments, finish, setup


def load_batch(rank: int, step: int, victim: int, fault_step: int) -> list[float]:
    if rank == victim and step == fault_step:
        announce(rank, f"a corrupt sample at step {step}")
        raise ValueError(f"corrupt sample in shard {rank} at step {step}")
    return [1.0]


def main() -> None:
    args = fault_arguments(__doc__.splitlines()[0]).parse_args()
    rank, _, device = setup()
    grad = torch.ones(args.numel, device=device)
    for step in range(args.steps):
        load_batch(rank, step, args.victim, args.fault_step)
        time.sleep(args.interval)
        dist.all_reduce(grad)
        grad.fill_(1.0)
    finish(rank, args.steps)


if __name__ == "__main__":
    main()
