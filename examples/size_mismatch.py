"""A rank all_reduces a tensor of the wrong size once (a shape that depends on rank-local data):
the ranks issue the same collective with different sizes, which the library cannot match.

    ddplab launch --nproc-per-node 2 --hang-timeout 30 -- examples/size_mismatch.py
"""

import time

import torch
import torch.distributed as dist

from _common import announce, fault_arguments, finish, setup


def main() -> None:
    args = fault_arguments(__doc__.splitlines()[0]).parse_args()
    rank, _, device = setup()
    for step in range(args.steps):
        time.sleep(args.interval)
        numel = args.numel
        if rank == args.victim and step == args.fault_step:
            numel = 2 * args.numel
            announce(rank, f"all_reduce of {numel} elements instead of {args.numel} at step {step}")
        grad = torch.ones(numel, device=device)
        dist.all_reduce(grad)
    finish(rank, args.steps)


if __name__ == "__main__":
    main()
