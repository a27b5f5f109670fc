"""Contention's efficiency against the right ideal, and one rule for its verdict and check row."""

import pytest

from ddplab import measurements
from ddplab.measurements import contention
from ddplab.records import Verdict
from ddplab.records.codec import from_json, to_json
from ddplab.records.contention import ContentionRecord, ContentionSummary
from ddplab.workloads import contention as workload
from tests.unit.fake_sessions import session_record


def record(solo: float, together: list[float], host: bool, threads: int = 1, cores: int | None = 2,
           warnings: tuple[str, ...] = ()) -> ContentionRecord:
    efficiency = contention.against_ideal(solo, together, host, threads, cores)
    summary = ContentionSummary(method="test", matrix=32, dtype="float32", seconds=1.0, solo_tflops=solo,
                                together_tflops=together, against_ideal=efficiency)
    return ContentionRecord(session=session_record(world_size=len(together), warnings=warnings), summary=summary)


def check_row(r: ContentionRecord):
    rows = [c for c in contention.checks(r) if c.check == "aggregate efficiency"]
    assert len(rows) == 1
    return rows[0]


def test_on_the_host_two_processes_on_two_cores_are_judged_against_two_cores():
    e = record(1.0, [0.979, 0.979], host=True, cores=2).summary.against_ideal  # read as "195.8 %" before
    assert e.ideal_factor == 2 and e.ideal_basis == "cores" and e.usable_cores == 2
    assert e.efficiency == pytest.approx(0.979)
    assert e.aggregate_over_solo == pytest.approx(1.958)
    assert e.ideal_aggregate_tflops == pytest.approx(2.0)
    assert "min(2 x 1, 2) / min(1, 2)" in e.efficiency_method


@pytest.mark.parametrize("k, threads, cores, factor", [
    (2, 1, 2, 2), (4, 1, 2, 2), (2, 1, 8, 2), (2, 2, 2, 1), (2, 2, 4, 2), (3, 1, None, None),
])
def test_ideal_factor_counts_usable_cores_and_threads(k, threads, cores, factor):
    assert contention.ideal_factor(True, k, threads, cores) == factor


def test_on_a_device_the_ideal_is_one_process_alone():
    e = record(660.0, [303.0, 303.0], host=False).summary.against_ideal
    assert e.ideal_factor == 1.0 and e.ideal_basis == "device"
    assert e.efficiency == pytest.approx(606 / 660)


@pytest.mark.parametrize("together, host, expected, row", [
    ([200.0, 200.0], False, "warn", "warn"),  # 40 % on a device: time slicing is expensive
    ([330.0, 330.0], False, "pass", "pass"),
    ([0.2, 0.2], True, "pass", "info"),  # the host is informational: its cores are shared with everything else
])
def test_command_verdict_and_check_row_follow_one_rule(together, host, expected, row):
    r = record(660.0 if not host else 1.0, together, host)
    assert measurements.verdict(contention, r) == expected
    assert check_row(r).verdict == row


def test_a_placement_warning_is_a_row_of_its_own_and_warns():
    """The command's verdict warned on the policy's warnings; the check rows now say so, next to efficiency."""
    r = record(660.0, [330.0, 330.0], host=False, warnings=("2 ranks time-slice one device",))
    assert check_row(r).verdict == Verdict.PASS
    assert [c.check for c in contention.checks(r)] == ["aggregate efficiency", "setup warnings"]
    assert measurements.verdict(contention, r) == Verdict.WARN


def test_unknown_cores_is_reported_as_not_available_and_warns():
    r = record(1.0, [0.9, 0.9], host=True, cores=None)
    assert r.summary.against_ideal.efficiency is None
    assert measurements.verdict(contention, r) == "warn" and check_row(r).verdict == "warn"
    assert check_row(r).value == "n/a" and "n/a" in contention.summary(r)


def test_reports_written_before_the_ideal_had_a_basis_are_judged_as_on_a_device():
    written = to_json(record(1.0, [0.25, 0.25], host=False))
    for key in ("ideal_basis", "usable_cores", "threads_per_process", "ideal_factor", "ideal_aggregate_tflops",
                "aggregate_over_solo", "efficiency_method"):
        del written[key]  # the keys reports had before the ideal got a basis (efficiency 0.5 here)
    old = from_json(ContentionRecord, written)
    assert old.summary.against_ideal.ideal_basis == "device"
    assert contention.judge(old.summary.against_ideal).verdict == "warn" and check_row(old).verdict == "warn"


@pytest.mark.parametrize("cpu_max, cores", [("max 100000\n", None), ("150000 100000\n", 2), ("50000 100000", 1),
                                            ("", None), (None, None), ("x y", None)])
def test_cgroup_quota_in_whole_cores(cpu_max, cores):
    assert workload.cgroup_quota_cores(cpu_max) == cores
