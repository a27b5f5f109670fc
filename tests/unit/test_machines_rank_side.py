"""The rank side of reports across machines, in this process as a one-rank gloo job: objects gathered
through plain all_gathers (no numpy), groups run and gathered, and a broken group stopping at its first
error instead of waiting a timeout at every size."""

from types import SimpleNamespace

import pytest

from ddplab.platform.runtime import DeviceRuntime
from ddplab.records.machines import PAIR, WHOLE_JOB, Group, RankPlace
from ddplab.records.sweep import SweepSettings
from ddplab.workloads import machines

SETTINGS = SweepSettings(ops=("all_reduce",), sizes=(8, 64, 512), dtype="float", mode="pipelined", iters=2,
                         warmup=1, check=True, repeat=2)


@pytest.fixture
def one_rank(tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        yield SimpleNamespace(rank=0, local_rank=0, world_size=1, device="cpu", runtime=DeviceRuntime("cpu", 0),
                              status=None)
    finally:
        dist.destroy_process_group()


def test_objects_travel_through_plain_all_gathers(one_rank):
    place = RankPlace(0, 0, "10.9.0.1", "vm")
    sent = {"place": place, "text": "é" * 1000}
    assert machines.gather_objects(sent, "cpu") == [sent]


def test_each_group_s_members_measure_and_every_result_is_gathered(one_rank):
    places = [RankPlace(0, 0, "10.9.0.1", "vm")]
    batches = [[Group(WHOLE_JOB, ["10.9.0.1"], [0])], [Group(PAIR, ["a", "b"], [0])], [Group(PAIR, ["c", "d"], [0])]]
    job = machines.run_in_groups(one_rank, places, batches, lambda handle, group: (handle is None, group.machines[0]))
    assert job.rounds == [[0], [1], [2]] and job.groups == [g for b in batches for g in b] and job.places == places
    # the whole job runs on the default group (None), every other group on a group of its own
    assert [(r.group, r.rank, r.result) for r in job.results] == [(0, 0, (True, "10.9.0.1")), (1, 0, (False, "a")),
                                                                  (2, 0, (False, "c"))]


def test_all_reduce_rows_are_timed_and_checked_per_size(one_rank):
    rows = machines.all_reduce_rows(one_rank, None, Group(WHOLE_JOB, ["m"], [0]), SETTINGS)
    assert [(r.size_bytes, r.count, r.num_wrong, len(r.repeats)) for r in rows] == [(8, 2, 0, 2), (64, 16, 0, 2),
                                                                                    (512, 128, 0, 2)]


def test_a_broken_group_stops_at_its_first_error(one_rank, monkeypatch):
    import torch.distributed as dist

    real, calls = dist.all_reduce, []

    def failing_from_the_second_size(tensor, *args, **kwargs):
        calls.append(tensor.numel())
        if tensor.numel() > 2:
            raise RuntimeError("Connection closed by peer")
        return real(tensor, *args, **kwargs)

    monkeypatch.setattr(dist, "all_reduce", failing_from_the_second_size)
    rows = machines.all_reduce_rows(one_rank, None, Group(PAIR, ["a", "b"], [0]), SETTINGS)
    assert [(r.size_bytes, r.error) for r in rows] == [(8, None), (64, "RuntimeError: Connection closed by peer")]
    assert 128 not in calls  # the third size was never tried

