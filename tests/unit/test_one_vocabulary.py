"""PASS, WARN, FAIL, SKIP and INFO mean the same wherever a row is shown: the record, the terminal, the page and
`check`'s own records; and a key figure never contradicts a row beside it."""

from pathlib import Path

from rich.console import Console

from ddplab.report import summary, terminal
from ddplab.reading.catalog import read_report
from ddplab.check.record import NodeCheck, Status
from ddplab.records import Check, Verdict
from ddplab.records.clean import ORPHANS_CHECK

ROOT = Path(__file__).resolve().parents[2]
REPORTS = [ROOT / "tests" / "fixtures" / "report-quick-cpu.json",
           ROOT / "docs" / "results" / "2xh200-final-round" / "round_b" / "full.json"]


def test_info_weighs_nothing_and_exits_0():
    assert Verdict.worst([Verdict.INFO, Verdict.PASS]) is Verdict.PASS
    assert Verdict.worst([Verdict.INFO, Verdict.WARN]) is Verdict.WARN
    assert Verdict.INFO.exit_code == 0 and Verdict.INFO.severity == Verdict.PASS.severity


def test_every_row_that_holds_nothing_is_info_in_the_record_the_terminal_and_the_page():
    """The quick CPU lab and the full 2 x H200 lab, judged again from their data: a row held to nothing says INFO
    in its record (it said PASS, the page said INFO and `check` said OK), and the terminal and the page show
    the record's word."""
    for path in REPORTS:
        report = read_report(str(path))
        rows = list(report.checks)  # every stage's rows, as the lab judged them again
        held_to_nothing = [c for c in rows if str(c.threshold).startswith("informational")]
        assert held_to_nothing and all(c.verdict in (Verdict.INFO, Verdict.SKIP) for c in held_to_nothing), \
            [(c.check, c.verdict) for c in held_to_nothing if c.verdict not in (Verdict.INFO, Verdict.SKIP)]
        assert all(summary.shown_verdict(c) == str(c.verdict) for c in rows)
        console = Console(record=True, width=200)
        console.print(terminal.check_table("rows", [c for c in held_to_nothing if c.verdict is Verdict.INFO][:1]))
        assert "INFO" in console.export_text() and "PASS" not in console.export_text()


def test_a_checks_node_row_keeps_the_rows_word_beside_the_runners_status():
    info = NodeCheck("train.step_time", "train", "step time", Status.of(Verdict.INFO), "p50 3 ms", "informational",
                     "train's own check", verdict=Verdict.INFO)
    assert info.status is Status.OK and info.as_check().verdict is Verdict.INFO
    old = NodeCheck("sweep.x", "sweep", "x", Status.UNKNOWN, "n/a", "ran", "sweep's own check")  # written before
    assert old.shown is Verdict.SKIP and old.as_check().verdict is Verdict.SKIP


def test_the_left_running_card_is_never_green_beside_an_orphans_row_that_fails():
    figure = summary.KeyFigure(summary.LEFT_RUNNING, "0", "0 process(es) of this lab", "pass")
    orphans = Check(ORPHANS_CHECK, Verdict.FAIL, "2", "0", "ranks whose launcher is gone", "ddplab clean", stage="env")
    shown = [summary.ShownCheck(orphans, "fail")]
    card, = summary._agreeing([figure], shown)
    assert card.tone == "fail" and "orphaned processes on the machine: 2 (FAIL, stage env)" in card.detail
    assert summary._agreeing([figure], []) == [figure]  # nothing beside it: as it was
