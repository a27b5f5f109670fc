"""Contention's efficiency against the right ideal, and one rule for its verdict and check row."""

import pytest

from ddplab import checks
from ddplab.commands import contention as command
from ddplab.workloads import contention as measure


def results(solo: float, together: list[float], host: bool, threads: int = 1, cores: int | None = 2) -> dict:
    return {"completed": True, "warnings": [], "world_size": len(together), "sharing_daemon": None,
            "solo_tflops": solo, "together_tflops": together,
            **measure.summarise(solo, together, host, threads, cores)}


def check_row(r: dict) -> dict:
    doc = {"command": "contention", "results": r}
    rows = checks.for_stage({"name": "contention", "verdict": command.verdict(r), "report": doc})
    assert len(rows) == 1
    return rows[0]


def test_on_the_host_two_processes_on_two_cores_are_judged_against_two_cores():
    r = results(1.0, [0.979, 0.979], host=True, cores=2)  # read as "195.8 %" before
    assert r["ideal_factor"] == 2 and r["ideal_basis"] == "cores" and r["usable_cores"] == 2
    assert r["efficiency"] == pytest.approx(0.979)
    assert r["aggregate_over_solo"] == pytest.approx(1.958)
    assert r["ideal_aggregate_tflops"] == pytest.approx(2.0)
    assert "min(2 x 1, 2) / min(1, 2)" in r["efficiency_method"]


@pytest.mark.parametrize("k, threads, cores, factor", [
    (2, 1, 2, 2), (4, 1, 2, 2), (2, 1, 8, 2), (2, 2, 2, 1), (2, 2, 4, 2), (3, 1, None, None),
])
def test_ideal_factor_counts_usable_cores_and_threads(k, threads, cores, factor):
    assert measure.ideal_factor(True, k, threads, cores) == factor


def test_on_a_device_the_ideal_is_one_process_alone():
    r = results(660.0, [303.0, 303.0], host=False)
    assert r["ideal_factor"] == 1.0 and r["ideal_basis"] == "device"
    assert r["efficiency"] == pytest.approx(606 / 660)


@pytest.mark.parametrize("together, host, expected", [
    ([200.0, 200.0], False, "warn"),  # 40 % on a device: time slicing is expensive
    ([330.0, 330.0], False, "pass"),
    ([0.2, 0.2], True, "pass"),  # the host is informational: its cores are shared with everything else
])
def test_command_verdict_and_check_row_follow_one_rule(together, host, expected):
    r = results(660.0 if not host else 1.0, together, host)
    assert command.verdict(r) == expected
    assert check_row(r)["verdict"] == expected


def test_unknown_cores_is_reported_as_not_available_and_warns():
    r = results(1.0, [0.9, 0.9], host=True, cores=None)
    assert r["efficiency"] is None
    assert command.verdict(r) == "warn" and check_row(r)["verdict"] == "warn"
    assert check_row(r)["value"] == "n/a" and "n/a" in command.summary_line(r)


def test_reports_written_before_the_ideal_had_a_basis_are_judged_as_on_a_device():
    old = {"completed": True, "warnings": [], "world_size": 2, "efficiency": 0.5}
    assert measure.judge(old)[0] == "warn" and check_row(old)["verdict"] == "warn"


@pytest.mark.parametrize("cpu_max, cores", [("max 100000\n", None), ("150000 100000\n", 2), ("50000 100000", 1),
                                            ("", None), (None, None), ("x y", None)])
def test_cgroup_quota_in_whole_cores(cpu_max, cores):
    assert measure.cgroup_quota_cores(cpu_max) == cores
