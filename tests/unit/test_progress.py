"""The stage line of `run` and `check` (report/progress.py): drawn only on a terminal that is standard output, from the
launcher, when a stage starts and when it ends; a log, a pipe and a console on standard error get nothing of it."""

import io
import sys

from rich.console import Console

from ddplab.lab import run as lab
from ddplab.measurements.storm import StormConfig
from ddplab.measurements.sweep import SweepConfig
from ddplab.lab.profiles import Stage
from ddplab.report.progress import StageProgress, shown


def _two_stages(console) -> None:
    with StageProgress(console, total=3, done=1) as progress:
        for name in ("storm", "sweep"):
            with progress.stage(name):
                console.print(f"{name} ran")


def test_a_terminal_on_stdout_sees_which_stage_runs(capsys):
    console = Console(force_terminal=True, width=120)  # writes to sys.stdout: capsys's, made to look a terminal
    assert shown(console)
    _two_stages(console)
    out = capsys.readouterr().out
    assert "stage 2 of 3: storm, started " in out and "stage 3 of 3: sweep, started " in out
    assert "storm ran" in out and "sweep ran" in out


def test_stdout_that_is_no_terminal_gets_the_stage_lines_alone(capsys):
    console = Console(width=120)  # sys.stdout under capsys: no terminal, as a log or a pipe
    assert not shown(console)
    _two_stages(console)
    assert capsys.readouterr().out == "storm ran\nsweep ran\n"


def test_a_console_on_stderr_or_a_quiet_one_never_draws_it(capsys):
    for console in (Console(file=sys.stderr, force_terminal=True), Console(stderr=True, force_terminal=True),
                    Console(force_terminal=True, quiet=True)):
        assert not shown(console)  # --format json and the runners' formats show the stages on standard error
        _two_stages(console)
    captured = capsys.readouterr()
    assert "stage 2 of 3" not in captured.out + captured.err


def test_the_lab_counts_a_stage_that_could_not_run_and_goes_on(monkeypatch, tmp_path):
    """The lab's own loop draws the line around each stage (lab.run_stages), and a stage that raised is counted."""
    drawn = []
    monkeypatch.setattr(StageProgress, "_draw", lambda self, text, advance=0: drawn.append(text))
    monkeypatch.setattr(lab, "run_stage", lambda records, stage, console: None)
    monkeypatch.setattr(lab, "leftover_check", lambda records: lab.StageRecord(lab.LEFTOVERS, "", lab.Verdict.PASS,
                                                                               "none"))
    plan = [Stage("storm", "storm", StormConfig()), Stage("sweep", "sweep", SweepConfig())]
    lab.run_stages(lab.RunConfig(), plan, tmp_path, Console(file=io.StringIO()), write=False)
    assert [t.split(",")[0] for t in drawn] == ["stage 1 of 2: storm", "1 of 2 stages done", "stage 2 of 2: sweep",
                                                "2 of 2 stages done"]
