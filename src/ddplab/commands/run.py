"""Run the whole lab in one command: check this machine, run DDP with several ranks on one device (and one
rank per device where there are several), the latency storm, the collective sweep, the copy ceiling, the
contention test and the fault drills, then check that nothing was left running. The report goes to report.json
and report.html in the output directory.

`ddplab run`: lab/run.py runs it; lab/profiles.py says what runs. Ctrl+C or SIGTERM stops the lab, still writes
a report marked interrupted and exits 130.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..lab import run as lab
from ..report import terminal
from ..errors import ExitCode
from . import options

SUMMARY = lab.SUMMARY
EXAMPLES = (  # shown by --help (commands.help_epilog)
    ("ddplab run", "the quick profile, on the accelerator if there is one, else on the CPU"),
    ("ddplab run --profile full --out lab1", "the complete GPU lab, its report in lab1/"),
    ("ddplab run --only sweep,drill",
     "only the sweep and the drills, besides the environment and leftover checks"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_config_arguments(parser, lab.RunConfig)


def config_from_args(args) -> lab.RunConfig:
    return options.config_from_args(lab.RunConfig, args)


def validate(args) -> lab.RunConfig:
    config = config_from_args(args)
    if config.out:
        check_out_dir(Path(config.out))
    return config


def check_out_dir(out: Path) -> None:
    """Refuse at once an --out that holds a run (one report would overwrite the other) or that is not writable."""
    from ..basics.files import check_output_dir
    from ..basics.rundir import check_unused

    check_output_dir(out, "--out")
    check_unused(out, "--out")


def main(args, console) -> int:
    from ..records import make_report
    from ..job.session import Observer

    config = config_from_args(args)
    report = make_report(lab, config, lab.run(config, Observer(console)))
    lab.write_reports(report, Path(report.results.out))
    code = options.finish(report, render_verdict, args, console)  # the copies, then the verdict and where it is
    return ExitCode.INTERRUPTED if report.results.interrupted else code


def render(report, console) -> None:
    """A lab's report as its run showed it: one line per stage, then the verdict table."""
    for stage in report.results.stages:
        console.print(terminal.stage_line(stage.verdict, stage.name, stage.summary, stage.duration_s))
    render_verdict(report, console)


def render_verdict(report, console) -> None:
    r = report.results
    console.rule("verdict")
    console.print(terminal.check_table(f"ddplab run --profile {r.profile}", r.checks))
    note = " (INTERRUPTED: partial report)" if r.interrupted else ""
    console.print(f"verdict: {terminal.verdict_text(report.verdict)}{note} in {r.duration_s} s; "
                  f"report: {r.out}/report.html")
