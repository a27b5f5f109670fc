"""Rank status through a real TCPStore, written by several rank processes, read by global rank."""

import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from torch.distributed import TCPStore

from ddplab.cluster.status_store import JobStoreReader
from ddplab.supervision.states import name_culprits
from tests.status_ranks import loopback_store  # noqa: F401 (a fixture)

pytestmark = pytest.mark.slow


def _writer(port: int, rank: int, world_size: int, collectives: int, address: str, run_dir) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.status_ranks", str(port), str(rank), str(world_size),
                             str(collectives), address, str(run_dir)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)


def test_several_writer_processes_are_read_by_global_rank_with_their_hosts(loopback_store, tmp_path):
    # ranks 0-1 on "machine" 10.9.0.1, 2-3 on 10.9.0.2; rank 3 falls one collective behind
    plan = {0: (5, "10.9.0.1"), 1: (5, "10.9.0.1"), 2: (5, "10.9.0.2"), 3: (4, "10.9.0.2")}
    writers = {r: _writer(loopback_store, r, 4, n, address, tmp_path / f"rank{r}")
               for r, (n, address) in plan.items()}
    try:
        assert [w.stdout.readline().strip() for w in writers.values()] == ["stuck"] * 4
        reader = JobStoreReader(TCPStore("127.0.0.1", loopback_store, None, False, timedelta(seconds=30)))
        views = reader.read()
        assert reader.world_size == 4
        assert {r: v.host for r, v in views.items()} == {0: "10.9.0.1", 1: "10.9.0.1", 2: "10.9.0.2", 3: "10.9.0.2"}
        assert {r: v.status.pid for r, v in views.items()} == {r: w.pid for r, w in writers.items()}
        assert {r: (v.status.phase, v.status.seq, v.status.done) for r, v in views.items()} == \
            {0: ("in-collective", 6, 5), 1: ("in-collective", 6, 5), 2: ("in-collective", 6, 5),
             3: ("in-collective", 5, 4)}
        culprits, why = name_culprits(reader.judging_records(views), 4, now=time.time(), stale_s=30)
        assert culprits == [3] and why == "entered 5 collectives while others entered 6"

        # rank 2 freezes (SIGSTOP): its beat stops while the others keep beating
        writers[2].send_signal(signal.SIGSTOP)
        time.sleep(0.3)
        frozen_at = reader.read()[2].heard_at
        waited = time.monotonic()  # a while, and until every other rank was heard again (a loaded machine is slow)
        while time.monotonic() - waited < 30:
            time.sleep(0.1)
            views = reader.read()
            if time.monotonic() - waited >= 1.0 and all(views[r].heard_at > frozen_at for r in (0, 1, 3)):
                break
        assert views[2].heard_at == frozen_at
        assert all(views[r].heard_at > frozen_at for r in (0, 1, 3))
        culprits, why = name_culprits(reader.judging_records(views), 4, now=time.time(), stale_s=0.8)
        assert culprits == [2] and "heartbeat stopped" in why
    finally:
        for w in writers.values():
            w.kill()
            w.wait()
