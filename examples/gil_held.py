"""A rank calls C code that holds the GIL and does not return (a C extension that never releases it, here
libc's sleep through ctypes.PyDLL, which keeps the GIL): its own Python threads stop with it, so nothing
inside the process can say where it is. Its peers wait in their next all_reduce.

    ddplab launch --nproc-per-node 2 --hang-timeout 10 -- examples/gil_held.py
"""

import ctypes
import time

import torch
import torch.distributed as dist

from _common import announce, fault_arguments, finish, setup


def hold_the_gil(seconds: int) -> None:
    ctypes.PyDLL(None).sleep(seconds)  # PyDLL keeps the GIL for the whole call


def main() -> None:
    parser = fault_arguments(__doc__.splitlines()[0])
    parser.add_argument("--hold", type=int, default=600, help="seconds the victim holds the GIL")
    args = parser.parse_args()
    rank, _, device = setup()
    grad = torch.ones(args.numel, device=device)
    for step in range(args.steps):
        time.sleep(args.interval)  # forward and backward
        if rank == args.victim and step == args.fault_step:
            announce(rank, f"holding the GIL for {args.hold} s")
            hold_the_gil(args.hold)
        dist.all_reduce(grad)
        grad.fill_(1.0)
    finish(rank, args.steps)


if __name__ == "__main__":
    main()
