"""Rank status through the job's own c10d store: published cheaply, read by global rank with hosts."""

import json
import socket
import time
from datetime import timedelta

from torch.distributed import HashStore, TCPStore

from ddplab.cluster.status_store import StatusPublisher, StatusReader, status_key
from tests.status_ranks import loopback_store  # noqa: F401 (a fixture)
from ddplab.status import name_culprits


class _Clock:
    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now


def test_a_phase_change_is_published_at_once_and_collectives_only_by_the_heartbeat():
    store, clock = HashStore(), _Clock()
    publisher = StatusPublisher(store, 3, 4, local_rank=1, node_rank=1, address="10.9.0.2", clock=clock,
                                heartbeat=False)
    first = json.loads(store.get(status_key(3)))
    assert {k: first[k] for k in ("rank", "local_rank", "node_rank", "world_size", "address", "phase", "beat")} == \
        {"rank": 3, "local_rank": 1, "node_rank": 1, "world_size": 4, "address": "10.9.0.2",
         "phase": "before-init", "beat": 1}
    assert first["host"] == socket.gethostname() and first["pid"] > 0
    publisher.phase("running")
    assert json.loads(store.get(status_key(3)))["phase"] == "running"
    assert publisher.enter_collective("all_reduce", 10) == 1
    publisher.leave_collective()
    assert publisher.enter_collective("broadcast", 20) == 2
    assert publisher.publishes == 2  # the hot path wrote nothing
    clock.now += 0.5
    publisher.publish()  # what the heartbeat thread does every interval
    record = json.loads(store.get(status_key(3)))
    assert (record["phase"], record["seq"], record["done"], record["op"], record["numel"]) == \
        ("in-collective", 2, 1, "broadcast", 20)
    assert record["heartbeat"] == 1000.5 and record["beat"] == 3


def test_a_store_that_went_away_is_noted_never_raised_into_the_rank():
    class Gone:
        def set(self, key, value):
            raise RuntimeError("Connection reset by peer")

    publisher = StatusPublisher(Gone(), 0, 1, heartbeat=False)
    assert publisher.publish() is False and publisher.last_error == "RuntimeError: Connection reset by peer"


def test_the_reader_judges_heartbeats_on_its_own_clock_not_the_ranks():
    store, reader_clock = HashStore(), _Clock(50.0)
    # rank 1's machine clock runs an hour behind: its heartbeat value alone would look frozen
    ranks = [StatusPublisher(store, r, 2, clock=_Clock(1000.0 - 3600 * r), heartbeat=False) for r in range(2)]
    reader = StatusReader(store, clock=reader_clock)
    views = reader.read()
    assert reader.world_size == 2 and [v.heard_at for v in views.values()] == [50.0, 50.0]
    reader_clock.now = 60.0
    ranks[0].publish()  # rank 0 beats, rank 1 does not
    views = reader.read()
    assert (views[0].heard_at, views[1].heard_at) == (60.0, 50.0)
    records = reader.judging_records(views, wall_now=5000.0)
    assert (records[0].heartbeat, records[1].heartbeat) == (5000.0, 4990.0)
    culprits, why = name_culprits(records, 2, now=5000.0, stale_s=5.0)
    assert culprits == [1] and "heartbeat stopped" in why


def test_ranks_that_never_published_are_named_by_global_rank():
    store = HashStore()
    StatusPublisher(store, 0, 3, heartbeat=False)
    StatusPublisher(store, 2, 3, heartbeat=False)
    reader = StatusReader(store)
    views = reader.read()
    assert sorted(views) == [0, 1, 2] and views[1].status is None and views[1].host is None
    culprits, why = name_culprits(reader.judging_records(views), 3, now=time.time(), stale_s=30)
    assert culprits == [1] and why == "never started (no status written)"


def test_a_value_that_is_not_a_rank_record_is_skipped():
    store = HashStore()
    store.set(status_key(0), "not json")
    store.set(status_key(1), json.dumps({"rank": 7}))
    assert {r: v.status for r, v in StatusReader(store, world_size=2).read().items()} == {0: None, 1: None}


def test_the_hot_path_and_one_publish_cost_on_this_machine(loopback_store, capsys):
    client = TCPStore("127.0.0.1", loopback_store, None, False, timedelta(seconds=30))
    publisher = StatusPublisher(client, 0, 1, heartbeat=False)
    n = 2000
    start = time.perf_counter()
    for _ in range(n):
        publisher.enter_collective("all_reduce", 1)
        publisher.leave_collective()
    hot_us = (time.perf_counter() - start) / n * 1e6
    start = time.perf_counter()
    for _ in range(n):
        publisher.publish()
    publish_us = (time.perf_counter() - start) / n * 1e6
    with capsys.disabled():
        print(f"\n  status store: enter+leave {hot_us:.2f} us, "
              f"one publish (TCPStore set, loopback) {publish_us:.1f} us")
    # loose bounds for a loaded 2-core machine: the point is the ratio, memory vs a round trip
    assert hot_us < 50 and publish_us < 5000


def test_an_elastic_worker_publishes_from_the_variables_elastic_and_the_launcher_set():
    store = HashStore()
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "GROUP_RANK": "1", "TORCHELASTIC_RESTART_COUNT": "2",
           "DDPLAB_NODE_ADDR": "10.9.0.2"}
    StatusPublisher.from_environment(store, env, heartbeat=False)
    assert not store.check([status_key(3)])  # an earlier attempt's key is never written or read
    views = StatusReader(store, restart_count=2).read()
    assert sorted(views) == [0, 1, 2, 3] and views[3].host == "10.9.0.2"
    assert {k: views[3].status[k] for k in ("rank", "local_rank", "node_rank", "world_size")} == \
        {"rank": 3, "local_rank": 1, "node_rank": 1, "world_size": 4}
