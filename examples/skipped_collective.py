"""A rank skips one all_reduce (say, it found a NaN loss and `continue`d), so it ends the loop one
collective short. Its peers wait in their last all_reduce for a partner that has already left.

    ddplab launch --nproc-per-node 2 --hang-timeout 30 -- examples/skipped_collective.py
"""

import time

import torch
import torch.distributed as dist

from _common import announce, fault_arguments, finish, setup


def main() -> None:
    args = fault_arguments(__doc__.splitlines()[0]).parse_args()
    rank, _, device = setup()
    grad = torch.ones(args.numel, device=device)
    for step in range(args.steps):
        time.sleep(args.interval)  # forward and backward
        if rank == args.victim and step == args.fault_step:
            announce(rank, f"skipped the all_reduce of step {step}")
            continue
        dist.all_reduce(grad)
        grad.fill_(1.0)
    finish(rank, args.steps)


if __name__ == "__main__":
    main()
