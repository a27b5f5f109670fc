"""`ddplab run`: the main job, the whole lab in one command (lab.py runs it; profiles.py says what runs).

env -> shared-device train -> per-device train (2+ devices) -> storm -> sweep -> ceiling/contention ->
drills -> leftover check -> report. Ctrl+C or SIGTERM stops the lab, still writes a report marked
interrupted and exits 130. <out>/report.json and <out>/report.html hold everything.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import display, lab
from ..config import PROFILES, RunConfig
from ..errors import ExitCode
from ..report import write_json

SUMMARY = "the whole lab in one command: env, DDP, storm, sweep, ceiling, contention, drills, report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default="quick", help=f"one of {', '.join(PROFILES)} (default: quick)")
    parser.add_argument("--nproc", type=int, default=2, help="ranks for the shared-device stages (default: 2)")
    parser.add_argument("--device", default="auto", help="device type (default: detected accelerator, else cpu)")
    parser.add_argument("--stage-deadline", type=float, default=120.0,
                        help="seconds without progress before a stage's ranks are cut (default: 120)")
    parser.add_argument("--out", default=None,
                        help="output directory, new or empty (default: ./ddplab-runs/run-<time>-<id>)")
    parser.add_argument("--json", metavar="PATH", help="also write the JSON report here")


def config_from_args(args) -> RunConfig:
    return RunConfig(profile=args.profile, nproc=args.nproc, device=args.device, out=args.out,
                     stage_deadline_s=args.stage_deadline)


def validate(args) -> RunConfig:
    config = config_from_args(args)
    if args.out:
        check_out_dir(Path(args.out))
    return config


def check_out_dir(out: Path) -> None:
    """Refuse at once an --out that holds a run (one report would overwrite the other) or that ddplab could not
    write."""
    from ..files import check_output_dir
    from ..rundir import check_unused

    check_output_dir(out, "--out")
    check_unused(out, "--out")


def main(args, console) -> int:
    report = lab.run(config_from_args(args), console)
    if args.json:  # before the verdict: it is printed only once every report is stored
        write_json(report.to_json(), args.json)
    render_verdict(report, console)
    if report.results.interrupted:
        return ExitCode.INTERRUPTED
    return report.verdict.exit_code


def render(report, console) -> None:
    """A lab's report as its run showed it: one line per stage (printed live by lab.py as each ends), then the
    verdict table."""
    for stage in report.results.stages:
        console.print(display.stage_line(stage.verdict, stage.name, stage.summary, stage.duration_s))
    render_verdict(report, console)


def render_verdict(report, console) -> None:
    r = report.results
    console.rule("verdict")
    console.print(display.check_table(f"ddplab run --profile {r.profile}", r.checks))
    note = " (INTERRUPTED: partial report)" if r.interrupted else ""
    console.print(f"verdict: {display.verdict_text(report.verdict)}{note} in {r.duration_s} s; "
                  f"report: {r.out}/report.html")
