"""`ddplab compare` reads any report through the records: a measurement it has never heard of lines up
through its record's ``timed_rows``, lab stages are prefixed by name, verdicts that got worse fail, and a
report that is not what it claims is refused (exit 2) naming the file and the field."""

import dataclasses
import json
from dataclasses import dataclass

import pytest

from ddplab import comparison, measurements
from ddplab.cli import main
from ddplab.config import SweepConfig
from ddplab.measurements import sweep
from ddplab.records import Report, Verdict
from ddplab.records.compare import TimedRow, stage_rows
from ddplab.records.sweep import SweepRow
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
    from ddplab import nccl_tests

    nccl = [t for t in (r.timed_row() for r in nccl_tests.parse(text).rows) if t]
    rows = comparison.line_up(nccl, sweep_record(ROWS).timed_rows(), 0.05, 0)
    assert [(r.op, r.size_bytes, r.in_place, r.old_time_us) for r in rows] == [("all_reduce", 8, True, 19.0)]
    assert dataclasses.asdict(rows[0])["regression"] is True  # 20.008 us against 19.0 us: 5.3 % slower
