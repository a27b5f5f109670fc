"""Issue 11: a new measurement through the public API alone (no change to commands, checks, HTML or compare)."""

from dataclasses import dataclass
from types import SimpleNamespace

from rich.console import Console

from ddplab.lab import run as lab
from ddplab import measurements
from ddplab.reading.comparison import line_up
from ddplab.lab.run import RunConfig
from ddplab.report.page import render_html
from ddplab.lab.profiles import Stage
from ddplab.records import Check, Verdict
from ddplab.records.compare import TimedRow, timed_rows_of
from ddplab.records.figures import BarChart
from ddplab.reading.catalog import read_report


@dataclass(frozen=True)
class ToyConfig:
    size_bytes: int = 64

    def to_argv(self) -> list[str]:
        return ["--size", str(self.size_bytes)]


@dataclass(frozen=True)
class ToyRecord:
    time_us: float

    def timed_rows(self, config) -> list[TimedRow]:
        return [TimedRow("toy", config.size_bytes, True, self.time_us)]

    def figures(self, stage: str) -> list[BarChart]:
        return [BarChart(f"toy-{stage}", "Toy", "toy latency", "run", "us", ["one"], [self.time_us])]


def _checks(record: ToyRecord) -> list[Check]:
    ok = record.time_us < 100
    return [Check("toy latency", Verdict.PASS if ok else Verdict.FAIL, f"{record.time_us} us", "< 100 us",
                  "a toy's number", "none")]


TOY = SimpleNamespace(NAME="toy", SUMMARY="a toy measurement", Config=ToyConfig, Record=ToyRecord,
                      run=lambda config, observer=None: ToyRecord(12.5), checks=_checks,
                      summary=lambda record: f"{record.time_us} us")


def test_a_toy_measurement_runs_as_a_stage_renders_and_compares(tmp_path, monkeypatch):
    # registered for this test only: the registries are the process's, and later tests list every kind
    monkeypatch.setattr(measurements, "MEASUREMENTS", dict(measurements.MEASUREMENTS))
    monkeypatch.setattr(measurements, "_registered", dict(measurements._registered))
    measurements.register(TOY)
    out = lab.claim_out_dir(str(tmp_path / "out"))  # as `ddplab run` claims its own
    run = lab.run_stages(RunConfig(), [Stage("toy-1", "toy", ToyConfig())], out, Console(quiet=True))
    assert run.verdict is Verdict.PASS
    assert [(c.stage, c.check, c.verdict) for c in run.results.checks][0] == ("toy-1", "toy latency", Verdict.PASS)
    again = read_report(str(out / "report.json"))  # read back through the records
    assert again.results.stages[0].report.results == ToyRecord(12.5)
    page = render_html(again)
    assert "toy latency" in page and "id='toy-toy-1'" in page and "ddplab toy --size 64" in page
    rows = line_up(timed_rows_of(again), timed_rows_of(again), tolerance=0.05, min_size=0)
    assert [(r.op, r.size_bytes, r.regression) for r in rows] == [("toy-1:toy", 64, False)]
