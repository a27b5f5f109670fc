"""Rank status through the job's own c10d store: the rank's RankState, published cheaply, read by global rank
with hosts."""

import json
import socket
import time
from datetime import timedelta

import pytest
from torch.distributed import HashStore, TCPStore

from ddplab.cluster.status_store import JobStoreReader, StatusPublisher, status_prefix
from ddplab.records.supervision import RankState
from ddplab.basics.rundir import RunDir
from ddplab.supervision.beacon import HEARTBEAT_S, Beacon
from ddplab.supervision.rank import RankLife
from ddplab.supervision.states import name_culprits
from tests.status_ranks import loopback_store  # noqa: F401 (a fixture)


class _Clock:
    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now


def RankStatus(run, rank, local_rank, **kw) -> Beacon:
    """A rank's beacon, started (its first status written and published)."""
    return Beacon(run, rank, local_rank, **kw).start()


def rank_status(run, rank, local_rank, world_size, environ) -> Beacon:
    """The beacon a rank of an elastic job starts, from elastic's variables and the launcher's."""
    env = {"RANK": str(rank), "LOCAL_RANK": str(local_rank), "WORLD_SIZE": str(world_size), **environ}
    return RankLife(run, env).start_beacon()


def _state(rank: int, world_size: int, **kw) -> RankState:
    return RankState(rank=rank, local_rank=kw.pop("local_rank", rank), pid=100 + rank, phase=kw.pop("phase", "running"),
                     world_size=world_size, beat=kw.pop("beat", 1), **kw)


def test_a_rank_writes_its_file_and_publishes_phase_changes_at_once_and_collectives_at_the_heartbeat(tmp_path):
    store = HashStore()
    run = RunDir.create(tmp_path / "run", "train")
    writer = RankStatus(run, 3, 1, world_size=4, node_rank=1, address="10.9.0.2",
                        publisher=StatusPublisher(store, 3, job="ddplab-10.9.0.1:29400-1"))
    key = f"{status_prefix('ddplab-10.9.0.1:29400-1')}/3"
    first = json.loads(store.get(key))
    assert {k: first[k] for k in ("rank", "local_rank", "node_rank", "world_size", "address", "phase")} == \
        {"rank": 3, "local_rank": 1, "node_rank": 1, "world_size": 4, "address": "10.9.0.2", "phase": "before-init"}
    assert first["host"] == socket.gethostname() and first["pid"] > 0
    assert store.get(f"{status_prefix('ddplab-10.9.0.1:29400-1')}/world_size") == b"4"
    writer.phase("running")
    assert json.loads(store.get(key))["phase"] == "running"
    writer.enter_collective("all_reduce", 10)
    assert json.loads(store.get(key))["phase"] == "running"  # the hot path wrote the file only
    assert json.loads(run.status_file(3).read_text())["phase"] == "in-collective"
    deadline = time.monotonic() + 5
    while json.loads(store.get(key))["phase"] != "in-collective" and time.monotonic() < deadline:
        time.sleep(0.05)  # the heartbeat publishes it
    writer.close()
    record = json.loads(store.get(key))
    assert (record["phase"], record["seq"], record["op"], record["numel"]) == ("in-collective", 1, "all_reduce", 10)


def test_a_store_that_went_away_is_noted_never_raised_into_the_rank():
    class Gone:
        def set(self, key, value):
            raise RuntimeError("Connection reset by peer")

    publisher = StatusPublisher(Gone(), 0)
    assert publisher.publish(_state(0, 1)) is False
    assert publisher.last_error == "RuntimeError: Connection reset by peer"


def test_the_reader_judges_heartbeats_on_its_own_clock_not_the_ranks():
    store, reader_clock = HashStore(), _Clock(50.0)
    # rank 1's machine clock runs an hour behind: its heartbeat value alone would look frozen
    publishers = [StatusPublisher(store, r) for r in range(2)]
    for r in range(2):
        publishers[r].publish(_state(r, 2, heartbeat=1000.0 - 3600 * r))
    reader = JobStoreReader(store, clock=reader_clock)
    views = reader.read()
    assert reader.world_size == 2 and [v.heard_at for v in views.values()] == [50.0, 50.0]
    reader_clock.now = 60.0
    publishers[0].publish(_state(0, 2, beat=2))  # rank 0 beats, rank 1 does not
    views = reader.read()
    assert (views[0].heard_at, views[1].heard_at) == (60.0, 50.0)
    records = reader.judging_records(views, wall_now=5000.0)
    assert (records[0].heartbeat, records[1].heartbeat) == (5000.0, 4990.0)
    culprits, why = name_culprits(records, 2, now=5000.0, stale_s=5.0)
    assert culprits == [1] and "heartbeat stopped" in why


def test_ranks_that_never_published_are_named_by_global_rank():
    store = HashStore()
    StatusPublisher(store, 0).publish(_state(0, 3))
    StatusPublisher(store, 2).publish(_state(2, 3))
    reader = JobStoreReader(store)
    views = reader.read()
    assert sorted(views) == [0, 1, 2] and views[1].status is None and views[1].host is None
    culprits, why = name_culprits(reader.judging_records(views), 3, now=time.time(), stale_s=30,
                                  expected=list(range(reader.world_size)))
    assert culprits == [1] and why == "never started (no status written)"


def test_another_launch_on_the_same_store_is_never_read_as_this_one():
    store = HashStore()
    StatusPublisher(store, 0, job="first").publish(_state(0, 1, phase="failed"))
    assert JobStoreReader(store, job="second").read() == {}
    assert JobStoreReader(store, job="first").read()[0].status.phase == "failed"


def test_a_value_that_is_not_a_rank_record_is_skipped():
    store = HashStore()
    store.set(f"{status_prefix()}/0", "not json")
    store.set(f"{status_prefix()}/1", json.dumps({"rank": 7, "pid": 1, "phase": "running"}))
    assert {r: v.status for r, v in JobStoreReader(store, world_size=2).read().items()} == {0: None, 1: None}


def test_one_publish_costs_a_round_trip_and_the_hot_path_none(loopback_store, capsys, tmp_path):
    client = TCPStore("127.0.0.1", loopback_store, None, False, timedelta(seconds=30))
    publisher = StatusPublisher(client, 0)
    n = 500
    start = time.perf_counter()
    for _ in range(n):
        publisher.publish(_state(0, 1))
    publish_us = (time.perf_counter() - start) / n * 1e6
    writer = RankStatus(RunDir.create(tmp_path / "run", "storm"), 0, 0, world_size=1, publisher=publisher)
    before, start = publisher.publishes, time.monotonic()
    for _ in range(n):
        writer.enter_collective("all_reduce", 1)
        writer.leave_collective()
    heartbeats = (time.monotonic() - start) / HEARTBEAT_S + 1
    writer.close()
    with capsys.disabled():
        print(f"\n  status store: one publish (TCPStore set, loopback) {publish_us:.1f} us")
    assert publish_us < 5000  # a loose bound for a loaded 2-core machine
    # while 500 collectives went by, only the heartbeat published (the file took every one)
    assert publisher.publishes - before <= heartbeats < n


def test_an_elastic_worker_publishes_where_the_launcher_said_with_elastics_identity(loopback_store, tmp_path):
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "GROUP_RANK": "1", "TORCHELASTIC_RESTART_COUNT": "2",
           "TORCHELASTIC_RUN_ID": "ddplab-job", "DDPLAB_NODE_ADDR": "10.9.0.2",
           "DDPLAB_STATUS_STORE": f"127.0.0.1:{loopback_store}"}
    rank_status(RunDir.create(tmp_path / "run", "train"), 3, 1, 4, environ=env).close()
    client = TCPStore("127.0.0.1", loopback_store, None, False, timedelta(seconds=30))
    assert not client.check([f"{status_prefix('ddplab-job')}/3"])  # an earlier attempt's key is never written or read
    views = JobStoreReader(client, job="ddplab-job", restart_count=2).read()
    assert sorted(views) == [0, 1, 2, 3] and views[3].host == "10.9.0.2"
    s = views[3].status
    assert (s.rank, s.local_rank, s.node_rank, s.world_size) == (3, 1, 1, 4)


def test_without_a_store_named_a_rank_writes_its_file_only(tmp_path):
    run = RunDir.create(tmp_path / "run", "train")
    writer = rank_status(run, 0, 0, 2, environ={})
    writer.close()
    assert writer._publisher is None and json.loads(run.status_file(0).read_text())["world_size"] == 2


def test_a_failing_rank_says_when_it_entered_the_phase_it_failed_in_on_the_readers_clock(tmp_path):
    store, reader_clock = HashStore(), _Clock(50.0)
    writer = RankStatus(RunDir.create(tmp_path / "run", "drill"), 1, 0, world_size=2,
                        publisher=StatusPublisher(store, 1))
    writer.phase("in-init")
    entered = writer.state.since
    writer.fail("RuntimeError: Connection refused")
    writer.close()
    mine = json.loads(writer.path.read_text())
    assert (mine["phase"], mine["failed_in"], mine["failed_in_since"]) == ("failed", "in-init", entered)
    assert mine["failed_at"] >= entered
    # another machine reads it on its own clock: the entry moves with the heartbeat and the failure
    reader = JobStoreReader(store, clock=reader_clock)
    record = reader.judging_records(reader.read(), wall_now=mine["heartbeat"] + 100.0)[1]
    assert record.failed_in_since == pytest.approx(entered + 100.0)
    assert record.failed_at == pytest.approx(mine["failed_at"] + 100.0)
