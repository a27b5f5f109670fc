"""A rank deadlocks in its own code, outside any collective: its prefetch thread dies on a bad
record and the training loop waits forever for the next batch, while its peers wait in the next
all_reduce.

    ddplab launch --nproc-per-node 2 --hang-timeout 30 -- examples/user_deadlock.py
"""

import queue
import threading
import time

import torch
import torch.distributed as dist

from _common import announce, fault_arguments, finish, setup


def prefetch(batches: queue.Queue, rank: int, victim: int, fault_step: int, steps: int) -> None:
    for step in range(steps):
        if rank == victim and step == fault_step:
            announce(rank, f"prefetch thread stops before batch {step}; the loop waits for it forever")
            return  # a real loader thread would have died on an exception here
        batches.put(step)


def main() -> None:
    args = fault_arguments(__doc__.splitlines()[0]).parse_args()
    rank, _, device = setup()
    batches: queue.Queue = queue.Queue(maxsize=2)
    threading.Thread(target=prefetch, args=(batches, rank, args.victim, args.fault_step, args.steps),
                     name="prefetch", daemon=True).start()
    grad = torch.ones(args.numel, device=device)
    for _ in range(args.steps):
        batches.get()  # the deadlock: nobody will ever put the next batch
        time.sleep(args.interval)
        dist.all_reduce(grad)
        grad.fill_(1.0)
    finish(rank, args.steps)


if __name__ == "__main__":
    main()
