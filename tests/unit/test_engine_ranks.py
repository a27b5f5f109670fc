"""The rank side of the engines (workloads/callers.py) in this process, as a one-rank gloo group: which engine
made the calls (the fake binding counts them), how many (warmup, every timed call, the check), the rows of
each engine, and the torch engine opening no binding at all."""

from __future__ import annotations

import pytest

from ddplab.platform import DeviceRuntime
from ddplab.platform import library_binding as lb
from ddplab.records.storm import StormSettings
from ddplab.records.sweep import SweepSettings
from ddplab.job.worker import RankContext
from ddplab.workloads import callers, storm, sweep
from tests.library_fake import GlooBinding

MADE: list[GlooBinding] = []


def counting_binding() -> GlooBinding:
    """The substitute the ranks open: the fake, kept here so the test can read what it issued."""
    binding = GlooBinding()
    MADE.append(binding)
    return binding


@pytest.fixture()
def one_rank(tmp_path, monkeypatch):
    import torch.distributed as dist

    MADE.clear()
    monkeypatch.setenv(lb.SUBSTITUTE_ENV, f"{__name__}:counting_binding")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    yield lambda settings: RankContext(0, 0, 1, DeviceRuntime("cpu", 0), settings)
    dist.destroy_process_group()


def _sweep_settings(engine: str) -> SweepSettings:
    return SweepSettings(ops=("all_reduce", "all_gather", "send_recv"), sizes=(8, 64), dtype="float",
                         mode="pipelined", iters=3, warmup=2, check=True, repeat=2, engine=engine)


def test_the_engine_names_put_torch_first():
    assert callers.engine_names("both") == ("torch", "library")
    assert callers.engine_names("library") == ("library",) and callers.engine_names("torch") == ("torch",)


def test_a_library_sweep_makes_every_call_through_the_binding(one_rank):
    result = sweep.run(one_rank(_sweep_settings("library")))
    assert len(MADE) == 1 and result.library_rows is None
    # Per row: 2 warmup + 3 iters x 2 repetitions + 1 check; all_reduce has 2 rows (in place), all_gather 4.
    assert MADE[0].issued == {"all_reduce": 2 * 9, "all_gather": 4 * 9}
    timed = [r for r in result.rows if r.skipped is None]
    assert [(r.op, r.size_bytes, r.in_place) for r in timed] == [
        ("all_reduce", 8, True), ("all_reduce", 64, True), ("all_gather", 8, False), ("all_gather", 8, True),
        ("all_gather", 64, False), ("all_gather", 64, True)]
    assert all(r.num_wrong == 0 and r.error is None and len(r.repeats) == 2 for r in timed)
    assert [r.skipped for r in result.rows if r.skipped] == ["needs at least 2 ranks"]  # send_recv, one rank


def test_both_engines_give_one_row_each_for_every_size_on_the_same_buffers(one_rank):
    result = sweep.run(one_rank(_sweep_settings("both")))
    assert MADE[0].issued == {"all_reduce": 2 * 9, "all_gather": 4 * 9}
    key = [(r.op, r.size_bytes, r.in_place, r.skipped) for r in result.rows]
    assert key == [(r.op, r.size_bytes, r.in_place, r.skipped) for r in result.library_rows]
    assert all(r.num_wrong == 0 for r in result.rows + result.library_rows if r.skipped is None)


def test_the_torch_engine_opens_no_binding(one_rank):
    result = sweep.run(one_rank(_sweep_settings("torch")))
    assert MADE == [] and result.library_rows is None
    assert all(r.num_wrong == 0 for r in result.rows if r.skipped is None)


def test_a_call_the_library_refuses_is_that_engine_s_error_and_torch_goes_on(one_rank, monkeypatch):
    def refusing_bind(self, calls, comm, stream):
        raise ValueError("the library has no such call")

    monkeypatch.setattr(GlooBinding, "bind", refusing_bind)
    result = sweep.run(one_rank(_sweep_settings("both")))
    timed = [i for i, r in enumerate(result.rows) if r.skipped is None]
    assert all(result.rows[i].error is None and result.rows[i].num_wrong == 0 for i in timed)
    assert all(result.library_rows[i].error == "ValueError: the library has no such call" for i in timed)
    assert all(result.library_rows[i].repeats is None for i in timed)


def test_a_storm_through_both_engines_runs_every_pass_through_each(one_rank):
    settings = StormSettings(iters=20, bytes=4, warmup=5, per_op_iters=7, engine="both")
    result = storm.run(one_rank(settings))
    # warmup 5 + pipelined 20 + the report's own method 20 + blocking 7 + the check 1 (no device events on the host)
    assert MADE[0].issued == {"all_reduce": 53}
    assert result.correct and result.library.correct and result.library.library is None
    assert result.per_op_us.n == result.library.per_op_us.n == 7 and result.library.device_us is None


def test_a_library_storm_returns_the_library_s_numbers_as_its_own(one_rank):
    result = storm.run(one_rank(StormSettings(iters=10, bytes=8, warmup=2, per_op_iters=3, engine="library")))
    assert MADE[0].issued == {"all_reduce": 2 + 10 + 10 + 3 + 1} and result.library is None and result.correct
