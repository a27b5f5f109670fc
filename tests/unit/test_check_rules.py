"""`ddplab check`'s expectations: a thresholds file per machine type (TOML), a baseline with a tolerance, and the
built-in defaults where neither is given; a file ddplab cannot use is refused naming the file, the key and what
is valid."""

from dataclasses import replace

import pytest

from ddplab.check import baseline, thresholds
from ddplab.check.judge import Expectations
from ddplab.check.record import MachineType, Status
from ddplab.errors import UsageError
from tests.crafted_reports import FIXTURE
from tests.unit.check_records import judged

CPU = MachineType("host CPU", 1, "Gloo")
H200 = MachineType("NVIDIA H200", 8, "NCCL 2.28.9")

GOOD = """
[[machine]]
device = "NVIDIA H200*"
count = 8
library = "NCCL 2.2*"
  [[machine.busbw]]
  op = "*"
  warning = 300.0
  critical = 150.0
  [[machine.latency]]
  quantile = "p99"
  warning = 60.0

[[machine]]
device = "host cpu"
  [[machine.busbw]]
  op = "all_reduce"
  size = "512K"
  warning = 100.0
  critical = 0.001
  [[machine.latency]]
  warning = 10.0
  critical = 100000.0
"""


def write(tmp_path, text: str) -> str:
    path = tmp_path / "thresholds.toml"
    path.write_text(text)
    return str(path)


def test_the_first_entry_that_matches_the_machine_type_is_used(tmp_path):
    t = thresholds.load(write(tmp_path, GOOD))
    assert t.for_machine(H200) is t.entries[0]
    assert t.for_machine(CPU) is t.entries[1], "wildcards and case: 'host cpu' matches 'host CPU'"
    assert t.for_machine(replace(H200, count=4)) is None and t.for_machine(replace(H200, library="RCCL 2.2")) is None


def test_bounds_set_the_severity_and_the_latency_bound_replaces_the_storms_own_line(tmp_path):
    record = judged(expectations=Expectations(thresholds=thresholds.load(write(tmp_path, GOOD))))
    rows = {c.key: c for c in record.node_checks}
    busbw = rows["busbw.all_reduce.in.524288"]
    assert busbw.status is Status.WARNING and "0.561 GB/s" in busbw.value and "machine[1].busbw[0]" in busbw.rule
    assert (busbw.reading.warning, busbw.reading.critical, busbw.reading.floor) == (100.0, 0.001, True)
    latency = rows["latency.mean"]
    assert latency.status is Status.WARNING and latency.reading.value == pytest.approx(303.44, abs=0.01)
    assert "storm.mean_all_reduce_latency" not in rows, "superseded by the file's latency bound"
    assert not any(k.startswith("busbw.") and "% of the" in rows[k].value for k in rows), "no built-in floor"
    assert record.status is Status.WARNING
    assert any("machine[1]" in e for e in record.expectations)


def test_a_file_without_an_entry_for_this_machine_warns_and_the_defaults_apply(tmp_path):
    only_h200 = GOOD.split("[[machine]]\ndevice = \"host cpu\"")[0]
    record = judged(expectations=Expectations(thresholds=thresholds.load(write(tmp_path, only_h200))))
    rows = {c.key: c for c in record.node_checks}
    assert rows["expectations.machine_type"].status is Status.WARNING
    assert "host CPU x1, Gloo" in rows["expectations.machine_type"].value
    assert "% of the" in rows["busbw.all_reduce.in.524288"].value, "the built-in floor judged busbw"


def test_built_in_floor_is_a_share_of_the_copy_ceiling():
    record = judged()
    row = {c.key: c for c in record.node_checks}["busbw.all_reduce.in.524288"]
    ceiling = record.metrics.copy_ceiling_gbps
    assert row.status is Status.OK and row.reading.warning == pytest.approx(0.005 * ceiling)
    assert judged("slow:all_reduce").status is Status.WARNING


def test_orphaned_ranks_on_the_node_are_critical_and_wrong_data_is_critical():
    from tests.unit.check_records import stages_of, with_orphan

    rows = {c.key: c for c in judged(stages=with_orphan(stages_of())).node_checks}
    assert rows["env.orphaned_processes"].status is Status.CRITICAL
    assert "nothing left behind" in rows["env.orphaned_processes"].rule
    assert {c.key: c for c in judged("wrong:all_reduce").node_checks}[
        "sweep.collective_results_correct"].status is Status.CRITICAL


def test_baseline_tolerance_warns_and_critical_tolerance_is_critical(tmp_path):
    from ddplab.check.config import CheckConfig
    from ddplab.check.runner import judge_report
    from ddplab.basics.files import write_json

    good = judge_report(CheckConfig(from_report=str(FIXTURE)), Expectations())
    path = tmp_path / "good.json"
    write_json(good.to_json(), path)
    for tolerance, critical, expected in ((0.05, None, Status.WARNING), (0.05, 0.5, Status.CRITICAL)):
        base = baseline.load(str(path), tolerance, critical)
        assert base.machine == CPU
        same = judged(expectations=Expectations(baseline=base))
        assert same.status is Status.OK, same.summary
        slow = {c.key: c for c in judged("slow:all_reduce", expectations=Expectations(baseline=base)).node_checks}
        row = slow["baseline.busbw.all_reduce.in.524288"]
        assert row.status is expected and "tolerance 5%" in row.rule
        assert row.reading.warning == pytest.approx(0.95 * good.results.metrics.largest()[0].busbw_gbps)
    lab_run = baseline.load(str(FIXTURE), 0.05, None)  # a lab report is a baseline too
    assert lab_run.metrics.busbw == good.results.metrics.busbw


def test_a_baseline_of_another_machine_type_cannot_judge_this_one(tmp_path):
    base = baseline.load(str(FIXTURE), 0.05, None)
    other = replace(base, machine=H200)
    rows = {c.key: c for c in judged(expectations=Expectations(baseline=other)).node_checks}
    assert rows["baseline.machine_type"].status is Status.UNKNOWN
    assert "NVIDIA H200 x8" in rows["baseline.machine_type"].value


BAD = [
    ("machine = 3", "machine is missing or not a list", "[[machine]] tables"),
    ("[[machine]]\ndevice = 'x'\n", "machine[0] has no bounds", "[[machine.busbw]]"),
    ("[[machine]]\ndevcie = 'x'\n", "machine[0].devcie is not a key", "device, count, library, busbw, latency"),
    ("[[machine]]\ncount = 0\n[[machine.busbw]]\nwarning = 1\n", "machine[0].count is 0", 'or "*"'),
    ("[[machine]]\n[[machine.busbw]]\nop = 'allreduce'\nwarning = 1\n", "machine[0].busbw[0].op is 'allreduce'",
     "all_reduce, all_gather, reduce_scatter, all_to_all"),
    ("[[machine]]\n[[machine.busbw]]\nsize = '3M'\nwarning = 1\n", "machine[0].busbw[0].size is '3M'", "largest"),
    ("[[machine]]\n[[machine.busbw]]\nwarning = 1\ncritical = 2\n", "machine[0].busbw[0].critical is 2",
     "critical <= warning"),
    ("[[machine]]\n[[machine.latency]]\nquantile = 'p95'\nwarning = 1\n", "machine[0].latency[0].quantile",
     "mean, p50, p90, p99, max"),
    ("[[machine]]\n[[machine.latency]]\nwarning = -1\n", "machine[0].latency[0].warning is -1", "above 0"),
    ("[[machine]]\n[[machine.latency]]\nop = 'x'\n", "machine[0].latency[0].op is not a key", "quantile"),
    ("[[machine]]\n[[machine.latency]]\n", "has neither warning nor critical", "warning = N"),
    ("[[machine]\n", "is not TOML", ""),
]


@pytest.mark.parametrize("text, problem, valid", BAD, ids=[b[1] for b in BAD])
def test_a_bad_thresholds_file_is_refused_naming_the_file_the_key_and_what_is_valid(tmp_path, text, problem, valid):
    path = write(tmp_path, text)
    with pytest.raises(UsageError) as err:
        thresholds.load(path)
    assert err.value.reference == "invalid-thresholds" and err.value.exit_code == 2
    assert path in err.value.message and problem in err.value.message and valid in err.value.message
