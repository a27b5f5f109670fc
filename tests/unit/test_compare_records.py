"""`ddplab compare` reads any report through the records: a measurement it has never heard of lines up
through its record's ``timed_rows``, lab stages are prefixed by name, verdicts that got worse fail, and a
report that is not what it claims is refused (exit 2) naming the file and the field."""

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from ddplab.reading import comparison
from ddplab import measurements
from ddplab.cli import main
from ddplab.measurements import sweep
from ddplab.measurements.sweep import SweepConfig
from ddplab.records import Report, Verdict
from ddplab.records.core import make_report, verdict_of
from ddplab.records.compare import TimedRow, stage_rows
from ddplab.records.sweep import SweepRow
from ddplab.reading.catalog import report_from_json
from tests.unit.sweep_records import sweep_record


@dataclass(frozen=True)
class ToyConfig:
    size: int = 1024


@dataclass(frozen=True)
class ToyRecord:
    latency_us: float

    def timed_rows(self, config):
        return [TimedRow("toy", config.size, True, self.latency_us)]


class Toy:
    """A measurement compare has never heard of: a Config, a Record with timed_rows, nothing else."""

    NAME, SUMMARY = "toy", "a toy"
    Config, Record = ToyConfig, ToyRecord

    @staticmethod
    def checks(record):
        return []


@pytest.fixture()
def toy(monkeypatch):
    monkeypatch.setattr(measurements, "MEASUREMENTS", dict(measurements.MEASUREMENTS))
    monkeypatch.setattr(measurements, "_registered", {})
    measurements.register(Toy)


def _write(path, report: Report) -> str:
    path.write_text(json.dumps(report.to_json()))
    return str(path)


def _exit(argv) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def test_a_new_measurement_is_compared_through_its_records_timed_rows(toy, tmp_path, capsys):
    a = _write(tmp_path / "a.json", measurements.report(Toy, ToyConfig(), ToyRecord(10.0)))
    b = _write(tmp_path / "b.json", measurements.report(Toy, ToyConfig(), ToyRecord(15.0)))
    out = tmp_path / "cmp.json"
    assert _exit(["compare", a, b, "--json", str(out)]) == 1
    text = capsys.readouterr().out
    assert "toy" in text and "<- slower" in text and "1 rows compared, 1 slower than A" in text
    doc = json.loads(out.read_text())
    assert doc["verdict"] == "fail" and doc["results"]["rows"][0]["time_change"] == pytest.approx(0.5)
    assert _exit(["compare", a, a]) == 0


def test_a_stage_named_after_another_command_prefixes_its_rows(toy):
    report = measurements.report(Toy, ToyConfig(), ToyRecord(10.0))
    assert [r.op for r in stage_rows("toy", report)] == ["toy"]
    assert [r.op for r in stage_rows("toy-shared", report)] == ["toy-shared:toy"]


@dataclass(frozen=True)
class Lab:
    """What compare reads of a lab's record: its stages' verdicts."""

    verdicts: dict

    def stage_verdicts(self):
        return self.verdicts


def _lab(**verdicts) -> Report:
    return Report(command="run", config=None, platform=None, results=Lab(verdicts), verdict=Verdict.PASS)


def test_a_stage_whose_verdict_got_worse_is_a_change_and_a_skip_counts_as_a_pass():
    old = _lab(env=Verdict.PASS, storm=Verdict.SKIP, sweep=Verdict.WARN, drills=Verdict.FAIL)
    new = _lab(env=Verdict.SKIP, storm=Verdict.FAIL, sweep=Verdict.PASS, drills=Verdict.FAIL, extra=Verdict.FAIL)
    changes = comparison.verdict_changes(old, new)
    assert [(c.stage, c.old, c.new) for c in changes] == [("storm", Verdict.SKIP, Verdict.FAIL)]
    assert comparison.verdict_changes(old, None) == []  # nccl-tests text has no stages


# --- a sweep report that is not what it claims: exit 2, the file and the field --------------------------

ROWS = [SweepRow(op="all_reduce", dtype="float", size_bytes=s, count=s // 4, in_place=True, time_us=20.0 + s / 1e3,
                 algbw_gbps=1.0, busbw_gbps=1.0, num_wrong=0) for s in (8, 64, 512)]


def _sweep_doc() -> dict:
    return json.loads(json.dumps(measurements.report(sweep, SweepConfig(), sweep_record(ROWS)).to_json()))


def _verdict_5(doc):
    doc["verdict"] = 5


def _no_results(doc):
    del doc["results"]


def _size_text(doc):
    doc["results"]["rows"][0]["size_bytes"] = "8"


def _nan_busbw(doc):
    doc["results"]["avg_busbw_gbps"] = float("nan")


def _zero_iters(doc):
    doc["config"]["iters"] = 0


BAD = [
    (_verdict_5, "field verdict must be a string, but it is 5"),
    (_no_results, "field results is missing; it must be an object"),
    (_size_text, 'field results.rows[0].size_bytes must be a number > 0, but it is the string "8"'),
    (_nan_busbw, "field results.avg_busbw_gbps must be a finite number, but it is NaN"),
    (_zero_iters, "field config.iters must be a valid value (-n 0 is out of range"),
]


@pytest.mark.parametrize("change, message", BAD, ids=[b[0].__name__ for b in BAD])
def test_a_bad_sweep_report_is_refused_naming_the_file_and_the_field(tmp_path, capsys, change, message):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(_sweep_doc()))
    doc = _sweep_doc()
    change(doc)
    bad.write_text(json.dumps(doc))
    for argv in (["compare", str(bad), str(good)], ["compare", str(good), str(bad)]):
        assert _exit(argv) == 2, argv
        err = capsys.readouterr().err
        assert str(bad) in err and message in err, err
    assert _exit(["compare", str(good), str(good)]) == 0


def test_a_report_with_nothing_timed_is_a_usage_error(tmp_path, capsys):
    path = tmp_path / "failed.json"
    failed = sweep_record([], completed=False)
    path.write_text(json.dumps(measurements.report(sweep, SweepConfig(), failed).to_json()))
    assert _exit(["compare", str(path), str(path)]) == 2
    assert "a ddplab sweep report with no timings" in capsys.readouterr().err


def test_nccl_tests_rows_and_a_sweep_line_up_on_the_collectives_name():
    text = ("#  Collective test starting: all_reduce_perf\n"
            "           8             2     float     sum      -1    20.00    0.00    0.00      0    19.00    0.00"
            "    0.00      0\n")
    from ddplab.measurements import nccl_tests

    nccl = [t for t in (r.timed_row() for r in nccl_tests.parse(text).rows) if t]
    rows = comparison.line_up(nccl, sweep_record(ROWS).timed_rows(), 0.05, 0)
    assert [(r.op, r.size_bytes, r.in_place, r.old_time_us) for r in rows] == [("all_reduce", 8, True, 19.0)]
    assert dataclasses.asdict(rows[0])["regression"] is True  # 20.008 us against 19.0 us: 5.3 % slower


# --- what A timed and B did not: never a PASS over the rows that remain (issue 18) ---------------------------

QUICK = Path(__file__).resolve().parents[1] / "fixtures/report-quick-cpu.json"


def _quick_with_stages(tmp_path, names) -> str:
    doc = json.loads(QUICK.read_text())
    doc["results"]["stages"] = [s for s in doc["results"]["stages"] if s["name"] in names]
    path = tmp_path / "b.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_stages_of_a_missing_from_b_fail_the_comparison_naming_them(tmp_path, capsys):
    b, out = _quick_with_stages(tmp_path, {"env", "storm"}), tmp_path / "cmp.json"
    assert _exit(["compare", str(QUICK), b, "--json", str(out)]) == 1
    text = capsys.readouterr().out
    assert "stage(s) of A missing from B: train-shared, sweep, ceiling, contention, drills, leftovers" in text
    assert "all_reduce in-place at 8, 32, 128, 512, 2K, 8K, 32K, 128K bytes and 1 more size(s): missing from B" in text
    assert "1 rows compared" in text and "10 row(s) and 6 stage(s) of A missing from B: FAIL" in text
    doc = json.loads(out.read_text())
    assert doc["verdict"] == "fail"
    assert doc["results"]["missing_stages"] == ["train-shared", "sweep", "ceiling", "contention", "drills", "leftovers"]
    assert {"op": "all_reduce", "size_bytes": 8, "in_place": True, "loss": True} in doc["results"]["missing_rows"]
    back = report_from_json(doc).results  # the record reads back as it was written
    assert back.missing_stages == doc["results"]["missing_stages"] and len(back.lost_rows) == 10
    assert _exit(["compare", b, str(QUICK)]) == 0  # B may have more than A


def test_a_stage_a_skipped_is_not_missing_from_b():
    old = _lab(env=Verdict.PASS, storm=Verdict.SKIP, sweep=Verdict.PASS)
    assert comparison.missing_stages(old, _lab(env=Verdict.PASS)) == ["sweep"]
    assert comparison.missing_stages(old, None) == []  # nccl-tests text has no stages: its rows say it


def _sweep_input(path, sizes, ops=("all_reduce",)) -> comparison.Input:
    rows = [dataclasses.replace(ROWS[0], op=op, size_bytes=s, count=s // 4) for op in ops for s in sizes]
    path.write_text(json.dumps(measurements.report(sweep, SweepConfig(), sweep_record(rows)).to_json()))
    return comparison.load_input(str(path))


def test_rows_of_a_that_the_same_command_did_not_time_in_b_are_lost(tmp_path):
    a = _sweep_input(tmp_path / "a.json", (8, 64, 512), ops=("all_reduce", "broadcast"))
    b = _sweep_input(tmp_path / "b.json", (8,))
    missing = comparison.missing_rows(a, b, min_size=0)
    assert [(m.op, m.size_bytes, m.loss) for m in missing] == [
        ("all_reduce", 64, True), ("all_reduce", 512, True),
        ("broadcast", 8, True), ("broadcast", 64, True), ("broadcast", 512, True)]
    assert [m.size_bytes for m in comparison.missing_rows(a, b, min_size=100)] == [512, 512]  # judged sizes only
    record = comparison.compare(comparison.CompareConfig("a", "b", 0.05, 0), a, b)
    assert len(record.rows) == 1 and verdict_of(comparison, record) == Verdict.FAIL


def test_a_placement_another_tool_never_times_warns_and_lost_sizes_fail(tmp_path):
    """nccl-tests times all_reduce out of place too; torch's all_reduce is in place only."""
    line = "{size:>12}  2  float  sum  -1  20.00  0.00  0.00  0  19.00  0.00  0.00  0\n"
    nccl = tmp_path / "nccl_tests.txt"
    nccl.write_text("#  Collective test starting: all_reduce_perf\n" + line.format(size=8))
    a, b = comparison.load_input(str(nccl)), _sweep_input(tmp_path / "b.json", (8,))
    record = comparison.compare(comparison.CompareConfig("a", "b", 100.0, 0), a, b)
    assert [(m.op, m.size_bytes, m.in_place, m.loss) for m in record.missing_rows] == [("all_reduce", 8, False, False)]
    assert verdict_of(comparison, record) == Verdict.WARN  # exit 0, the rows named
    nccl.write_text("#  Collective test starting: all_reduce_perf\n" + line.format(size=8) + line.format(size=64))
    record = comparison.compare(comparison.CompareConfig("a", "b", 100.0, 0), comparison.load_input(str(nccl)), b)
    assert [(m.size_bytes, m.in_place, m.loss) for m in record.missing_rows] == [
        (8, False, False), (64, False, False), (64, True, True)]  # B times all_reduce in place, not at 64 B
    assert verdict_of(comparison, record) == Verdict.FAIL


def test_a_comparison_that_lost_nothing_keeps_its_keys(tmp_path):
    a = _sweep_input(tmp_path / "a.json", (8, 64))
    record = comparison.compare(comparison.CompareConfig("a", "a", 0.05, 0), a, a)
    doc = make_report(comparison, comparison.CompareConfig("a", "a", 0.05, 0), record).to_json()
    assert set(doc["results"]) == {"rows", "verdict_changes"} and doc["verdict"] == "pass"
