"""Rank stand-ins for the status-store tests, and the store they publish to.

    python -m tests.status_ranks PORT RANK WORLD_SIZE COLLECTIVES ADDRESS RUN_DIR

Each writes its status as a rank does (supervision.beacon.Beacon: a file in a directory of its own, and
the store), goes through a rank's phases, completes COLLECTIVES all_reduces, then enters one more and stays
inside it (a rank stuck in a collective) until killed; prints "stuck" once published there.
"""

import os
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from ddplab.cluster.status_store import StatusPublisher, open_store
from ddplab.basics.rundir import RunDir
from ddplab.supervision.beacon import Beacon


@pytest.fixture
def loopback_store():
    """A real TCPStore server on a socket bound to 127.0.0.1 (as cluster/rendezvous.py serves one); its port."""
    from torch.distributed import TCPStore

    from ddplab.cluster.exposure import bind_loopback

    listener = bind_loopback()
    port = listener.getsockname()[1]
    server = TCPStore("127.0.0.1", port, None, True, timedelta(seconds=30), wait_for_workers=False,
                      master_listen_fd=os.dup(listener.fileno()))
    try:
        yield port
    finally:
        del server
        listener.close()


def main(port: int, rank: int, world_size: int, collectives: int, address: str, run_dir: str) -> None:
    run = RunDir(Path(run_dir), "status-ranks")
    status = Beacon(run, rank, rank % 2, world_size=world_size, node_rank=rank // 2, address=address,
                    publisher=StatusPublisher(open_store("127.0.0.1", port), rank)).start()
    status.phase("in-init")
    status.phase("running")
    for _ in range(collectives):
        status.enter_collective("all_reduce", 1)
        status.leave_collective()
    status.enter_collective("all_reduce", 1024)
    status.phase("in-collective")  # published at once, rather than at the next heartbeat
    print("stuck", flush=True)
    time.sleep(600)


if __name__ == "__main__":
    port, rank, world_size, collectives = map(int, sys.argv[1:5])
    main(port, rank, world_size, collectives, sys.argv[5], sys.argv[6])
