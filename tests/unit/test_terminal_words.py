"""What the terminal shows never says None, null or nan, and a row that measured nothing is never a PASS.

Every report in tests/fixtures/ (and each stage report inside a lab's) goes through the renderers the commands
print with (commands.render) and the check table `ddplab run` prints for it; tests/golden/test_json_keys.py does
the same for the golden runs' reports and their real terminal output."""

import copy
import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from ddplab import commands
from ddplab.report import terminal
from ddplab.measurements import env as env_measurement, report_checks
from ddplab.records import Report, Verdict
from ddplab.records.env import TwoRankPlan
from ddplab.reading.catalog import report_from_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REPORTS = sorted(FIXTURES.glob("*.json"))
MISSING_WORDS = re.compile(r"\b(?:None|null|nan|NaN)\b")


def terminal_text(report: Report) -> str:
    """Everything the terminal would show of ``report``: the command's own rendering and its check rows, and for a
    lab each stage's report as its own command shows it."""
    out = io.StringIO()
    console = Console(file=out, width=200, highlight=False, color_system=None)
    commands.render(report, console)
    if report.command != "run":
        console.print(terminal.check_table(report.command, report_checks(report)))
    else:
        for stage in report.results.stages:
            if stage.report is not None:
                commands.render(stage.report, console)
                console.print(terminal.check_table(stage.name, report_checks(stage.report)))
    return out.getvalue()


def missing_words(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if MISSING_WORDS.search(line)]


def test_there_are_fixture_reports():
    assert {p.name for p in REPORTS} >= {"report-quick-cpu.json", "launch-report-skipped-collective.json"}


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.name)
def test_a_fixture_report_reads_without_none_null_or_nan(path):
    report = report_from_json(json.loads(path.read_text()))
    assert missing_words(terminal_text(report)) == []


def _drill_report(**outcome) -> Report:
    """The quick lab's drill stage with one drill's outcome replaced (as JSON, so it is what a report holds)."""
    doc = json.loads((FIXTURES / "report-quick-cpu.json").read_text())
    drills = copy.deepcopy(next(s for s in doc["results"]["stages"] if s["name"] == "drills")["report"])
    drills["results"]["drills"][0].update(outcome)
    return report_from_json(drills)


def test_an_interrupted_drill_says_so_in_words():
    report = _drill_report(detected_by=None, detect_s=None, culprit_ranks=[], culprit_reason="",
                           torchrun_root_cause_rank=None, interrupted=True, verdict="fail",
                           injected={"what": None, "rank": 1, "at": None})
    text = terminal_text(report)
    assert missing_words(text) == []
    assert "interrupted before anything was detected; culprit none named; leaked 0" in text
    assert "nothing went in (rank 1)" in text and "no rank (none failed)" in text


def test_a_fault_that_never_went_in_and_memory_that_never_came_back_are_words():
    report = _drill_report(detected_by=None, detect_s=None, injected={"what": "SIGKILL", "rank": 1, "at": None},
                           device_mem_before_bytes=1 << 30, device_mem_after_bytes=1 << 30, memory_back_s=None)
    text = terminal_text(report)
    assert missing_words(text) == []
    assert "the fault never went in, so nothing was detected" in text and "never, within the wait" in text


def test_a_float_that_is_not_a_number_reads_n_a():
    assert terminal.text_of(float("nan")) == "n/a"
    assert (terminal.text_of({"detect_s": None, "culprit_ranks": [1, None]})
            == "{detect_s: n/a, culprit_ranks: [1, n/a]}")


# -- a row that measured nothing is SKIP with why, never PASS --------------------------------------------------

def test_a_placement_this_machine_cannot_have_is_skipped_with_why():
    plan = TwoRankPlan(2, False, "needs 2 devices; this machine has 1")
    row = env_measurement.plan_check("per_device", plan)
    assert (row.verdict, row.value) == (Verdict.SKIP, "needs 2 devices; this machine has 1")


def test_a_stored_lab_report_judged_again_skips_the_placement_it_could_not_have():
    doc = json.loads((FIXTURES / "report-quick-cpu.json").read_text())
    env_report = report_from_json(next(s for s in doc["results"]["stages"] if s["name"] == "env")["report"])
    rows = {c.check: c for c in report_checks(env_report)}
    assert rows["2 ranks, one per device"].verdict is Verdict.SKIP
    assert rows["2 ranks, one device"].verdict is Verdict.PASS  # what was planned is still judged
