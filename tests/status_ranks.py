"""Rank stand-ins for the status-store tests, and the store they publish to.

    python -m tests.status_ranks PORT RANK WORLD_SIZE COLLECTIVES ADDRESS

Each goes through the phases a rank does, completes COLLECTIVES all_reduces, then enters one more
and stays inside it (a rank stuck in a collective) until killed; prints "stuck" once published there.
"""

import os
import sys
import time
from datetime import timedelta

import pytest

from ddplab.cluster.status_store import StatusPublisher, open_store


@pytest.fixture
def loopback_store():
    """A real TCPStore server on a socket bound to 127.0.0.1 (as rendezvous.py serves one); its port."""
    from torch.distributed import TCPStore

    from ddplab.rendezvous import bind_loopback

    listener = bind_loopback()
    port = listener.getsockname()[1]
    server = TCPStore("127.0.0.1", port, None, True, timedelta(seconds=30), wait_for_workers=False,
                      master_listen_fd=os.dup(listener.fileno()))
    try:
        yield port
    finally:
        del server
        listener.close()


def main(port: int, rank: int, world_size: int, collectives: int, address: str) -> None:
    publisher = StatusPublisher(open_store("127.0.0.1", port), rank, world_size, local_rank=rank % 2,
                                node_rank=rank // 2, address=address, interval_s=0.1)
    publisher.phase("in-init")
    publisher.phase("running")
    for _ in range(collectives):
        publisher.enter_collective("all_reduce", 1)
        publisher.leave_collective()
    publisher.enter_collective("all_reduce", 1024)
    publisher.publish()
    print("stuck", flush=True)
    time.sleep(600)


if __name__ == "__main__":
    port, rank, world_size, collectives = map(int, sys.argv[1:5])
    main(port, rank, world_size, collectives, sys.argv[5])
