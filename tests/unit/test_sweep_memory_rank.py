"""The rank's side of memory planning (workloads/memory.py) in this process, as a one-rank gloo group: a size over
the budget is skipped with this rank's plan, the others are measured with their planned and measured RSS, and
every size is freed before the next is planned."""

import pytest

from ddplab.platform import memory_plan
from ddplab.platform import DeviceRuntime
from ddplab.records.memory import MemoryShare
from ddplab.records.sweep import SweepSettings
from ddplab.job.worker import RankContext
from ddplab.workloads import memory as rank_memory
from ddplab.workloads import sweep

MiB = 1 << 20


@pytest.fixture()
def one_rank(tmp_path, monkeypatch):
    import torch.distributed as dist

    freed = []
    monkeypatch.setenv(memory_plan.BUDGET_ENV, "20M")
    monkeypatch.setattr(rank_memory, "release", lambda runtime, staged: freed.append(staged))
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    yield (lambda settings: RankContext(0, 0, 1, DeviceRuntime("cpu", 0), settings)), freed
    dist.destroy_process_group()


def test_a_size_over_the_budget_is_skipped_and_every_size_is_freed(one_rank):
    context, freed = one_rank
    settings = SweepSettings(ops=("all_reduce", "all_gather"), sizes=(8, 4 * MiB), dtype="float", mode="pipelined",
                             iters=3, warmup=1, check=True, repeat=1, memory=MemoryShare(1, 1))
    rows = sweep.run(context(settings)).rows
    assert [(r.op, r.size_bytes, r.in_place, r.skipped is not None) for r in rows] == [
        ("all_reduce", 8, True, False), ("all_reduce", 4 * MiB, True, True),
        ("all_gather", 8, False, False), ("all_gather", 8, True, False),
        ("all_gather", 4 * MiB, False, True), ("all_gather", 4 * MiB, True, True)]
    big = rows[1]
    # 4 MiB buffer + 17 B x 1 Mi elements of check data, + the margin's 16 MiB floor: 37 MiB, over 20 MiB
    assert big.host_need_bytes == memory_plan.with_margin(4 * MiB + 17 * MiB) and big.repeats is None
    assert not big.memory.fits and big.memory.host_available_bytes == 20 * MiB
    assert big.skipped == big.memory.reason and big.skipped.startswith("needs 37.0 MiB of host memory for 1 rank(s)")
    small = rows[0]
    assert small.memory is None and small.num_wrong == 0 and len(small.repeats) == 1
    assert small.peak_rss_bytes >= small.start_rss_bytes > 0
    assert freed == [False] * len(rows)  # after every row, skipped or not; nothing staged on the host CPU


def test_the_merged_row_of_a_skipped_size_carries_the_plan_of_the_rank_that_was_short():
    from ddplab.measurements.sweep import merge_row
    from ddplab.records.memory import MemoryFit
    from ddplab.records.sweep import SweepRankRow

    fine = MemoryFit(True, 2 * MiB, 64 * MiB, method="per rank: x")
    short = MemoryFit(False, 80 * MiB, 64 * MiB, reason="needs 80.0 MiB of host memory ...", method="per rank: x")
    row = dict(op="all_gather", size_bytes=64, count=16, in_place=False)
    rank0 = SweepRankRow(**row, skipped=rank_memory.OTHER_RANK, memory=fine, host_need_bytes=40 * MiB,
                         start_rss_bytes=200 * MiB, peak_rss_bytes=201 * MiB)
    rank1 = SweepRankRow(**row, skipped=short.reason, memory=short, host_need_bytes=40 * MiB,
                         start_rss_bytes=210 * MiB, peak_rss_bytes=211 * MiB)
    merged = merge_row((rank0, rank1), 2, "float")
    assert merged.memory == short and merged.skipped == short.reason and merged.time_us is None
    assert (merged.host_need_bytes, merged.start_rss_bytes, merged.peak_rss_bytes) == (40 * MiB, 210 * MiB,
                                                                                        211 * MiB)
    op_level = merge_row((SweepRankRow(op="send_recv", skipped="needs at least 2 ranks"),), 1, "float")
    assert op_level.skipped == "needs at least 2 ranks" and op_level.size_bytes is None and op_level.memory is None
