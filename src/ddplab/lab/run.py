"""`ddplab run` as a library: the whole lab in one call.

env -> train -> storm -> sweep -> ceiling/contention -> drills -> leftover check -> report. Each stage is a
measurement's ``run(config)`` on a Config from the profile, isolated: one that fails or cannot run here is
recorded and the next still runs; ranks that hang are cut by ddplab's supervisor (the stage deadline is every
stage's hang timeout). Ctrl+C or SIGTERM stops the lab and still writes a report marked interrupted.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from rich.console import Console

from ..basics import interrupts
from .. import measurements
from ..basics.cli_options import Range, check_fields, option
from ..records.config import DEVICES, SECONDS
from ..errors import DdplabError, ExitCode
from ..basics.files import DiskFull
from ..measurements import LEFTOVERS, stage_checks
from ..basics.observer import QUIET, Observer
from .profiles import Machine, Stage, host_note, kinds, stages
from ..records import Check, Report, Verdict, make_report
from ..records.core import InSession, Interruptible, StartsRuns
from ..records.run import RunRecord, StagePlan, StageRecord
from ..report.progress import StageProgress
from ..report.terminal import escape
from ..basics.validators import MAX_NPROC, check_choice, require

NAME = COMMAND = "run"
SUMMARY = "the whole lab in one command: env, DDP, storm, sweep, ceiling, contention, drills, report"
PROFILES = ("quick", "full", "soak")


def _stage_kinds(text: str, flag: str) -> tuple[str, ...]:
    """--only: stage kinds separated by commas, each named once (the profile's own are checked by RunConfig)."""
    names = [k.strip() for k in text.split(",")]
    every = kinds("full")
    require(all(names), "invalid-stage-kind", f"{flag} {text!r} names no stage kind between its commas; valid "
                                              f"choices: {', '.join(every)}")
    for name in names:  # ("drills", the stage's name in the report: maybe you meant "drill")
        check_choice(name, "stage kind", every)
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class RunConfig:
    """The whole lab: which profile, on which device, where its reports go."""

    profile: str = option("--profile", default="quick", choices=PROFILES)
    """quick: every stage, CI-sized; full: the complete GPU lab, at sizes for an accelerator; soak: the storm and
    the sweep repeated.

    lab/profiles.py says what each profile runs."""
    nproc: int = option("--nproc", default=2, range=Range(1, MAX_NPROC, unit=" ranks per node"))
    """Ranks of the shared-device stages."""
    device: str = option("--device", default="auto", choices=DEVICES)
    """Device type, or auto for the detected accelerator (cpu when none)."""
    out: str | None = option("--out", default=None, metavar="DIR")
    """Output directory, new or empty; default: ./ddplab-runs/run-<time>-<id>."""
    stage_deadline_s: float = option("--stage-deadline", default=120.0, range=SECONDS)
    """Every stage's hang timeout: seconds without progress before its ranks are cut."""
    only: tuple[str, ...] = option("--only", default=(), metavar="KINDS", parse=_stage_kinds,
                                   listed=lambda: kinds("full"))
    """Run only the profile's stages of these kinds, comma-separated (the env stage and the leftover check always
    run); default: every stage of the profile."""
    stages: list[StagePlan] = field(default_factory=list)
    """Filled in once the machine is known (the env stage): each stage's command line."""

    def __post_init__(self):
        check_fields(self)
        mine = kinds(self.profile)
        require(isinstance(self.only, tuple) and all(k in mine for k in self.only), "invalid-stage-kind",
                f"--only {','.join(map(str, self.only))}: the {self.profile} profile's stages are of the kinds "
                f"{', '.join(mine)}")


Config, Record = RunConfig, RunRecord


def run(config: RunConfig, observer: Observer = QUIET) -> RunRecord:
    """Run every stage of the profile into ``config.out`` (claimed); ``write_reports`` writes the report made of the
    record (records.make_report: its config as planned, its verdict the worst of its checks)."""
    console = observer.console or Console(quiet=True)
    out = claim_out_dir(config.out)
    started = time.monotonic()
    records: list[StageRecord] = []
    env_stage = Stage("env", "env", measurements.get("env").Config(device=config.device))
    env_report = run_stage(records, env_stage, console)
    platform = env_report.platform if env_report else None
    machine = Machine.of(platform, config.device)
    plan = stages(config.profile, config.nproc, machine, out, config.stage_deadline_s)
    if config.only:
        plan = [s for s in plan if s.measurement in config.only]
    note = host_note(config.profile, machine, config.nproc)
    if note is not None:
        console.print(f"[yellow]note:[/] {escape(note)}")
    return run_stages(config, plan, out, console, platform, records, started, first=[env_stage], write=False).results


def run_stages(config: RunConfig, plan: list[Stage], out: Path, console, platform=None,
               records: list[StageRecord] | None = None, started: float | None = None,
               first: list[Stage] = (), write: bool = True) -> Report:
    """Run ``plan`` stage by stage into ``out`` (claimed), then the leftover check; write and return the report.
    ``records``: stages already run (listed in ``first``). ``write=False``: for a command that writes its own
    report (`ddplab check`). ``config``: the lab's, or another Config with ``out`` and ``stages``."""
    records = records if records is not None else []
    started = started if started is not None else time.monotonic()
    interrupted = False
    with StageProgress(console, total=len(records) + len(plan), done=len(records)) as progress:
        for stage in plan:
            if interrupts.requested():  # Ctrl+C/SIGTERM between stages (or during env)
                break
            try:
                with progress.stage(stage.name):
                    report = run_stage(records, stage, console)
            except KeyboardInterrupt:  # a second Ctrl+C: the stage was cut short
                interrupted = True
                records.append(StageRecord(stage.name, stage.command_line, Verdict.FAIL, "interrupted by the user",
                                           error="interrupted"))
                break
            if report is not None and isinstance(report.results, Interruptible) and report.results.interrupted:
                # its ranks or drills were stopped
                interrupted = True
                break
    records.append(leftover_check(records))
    interrupted = interrupted or bool(interrupts.requested())
    planned = replace(config, out=str(out), stages=[StagePlan(s.name, s.measurement, s.argv)
                                                   for s in [*first, *plan]])
    record = RunRecord(profile=config.profile, stages=records, checks=[c for s in records for c in stage_checks(s)],
                       interrupted=interrupted, duration_s=round(time.monotonic() - started, 1),
                       out=str(out.resolve()), platform=platform, ran_with=planned)
    report = make_report(sys.modules[__name__], config, record)
    if write:
        write_reports(report, out)
    return report


def config_as_run(config: RunConfig, record: RunRecord) -> RunConfig:
    """The lab's config with its output directory and each stage's command line, as the env stage planned them."""
    return record.ran_with or config


def checks(record: RunRecord) -> list[Check]:
    """Every stage's own checks, with the stage's name (``stage_checks``), kept in the record as they ran."""
    return record.checks


def summary(record: RunRecord) -> str:
    note = ", interrupted" if record.interrupted else ""
    return f"{len(record.stages)} stage(s) in {record.duration_s} s{note}: {record.out}"


def claim_out_dir(out: str | None, command: str = COMMAND) -> Path:
    """This run's own output directory: --out (refused if it holds a run), else ./ddplab-runs/<command>-<time>-<id>
    (a unique suffix: two runs started in the same second must not share one)."""
    from ..basics.rundir import claim_new

    return claim_new(out, command, "--out")[0]


def write_reports(report: Report, out: Path) -> None:
    from ..report.page import write_page
    from ..basics.files import write_json

    write_json(report.to_json(), out / "report.json")
    write_page(report, out / "report.html")


def run_stage(records: list[StageRecord], stage: Stage, console) -> Report | None:
    """Run one stage in isolation; record what it gave, or why it could not run."""
    from ..report import terminal

    console.rule(f"stage: {stage.name}  ({stage.command_line})")
    started = time.monotonic()
    measurement = measurements.get(stage.measurement)
    try:
        result = measurement.run(stage.config, Observer(None, live=False))
    except DdplabError as exc:  # this machine cannot run the stage: record it, go on
        cannot_run_here = exc.exit_code == ExitCode.ENVIRONMENT and not isinstance(exc, DiskFull)
        records.append(StageRecord(stage.name, stage.command_line, Verdict.SKIP if cannot_run_here else Verdict.FAIL,
                                   exc.message, round(time.monotonic() - started, 2), error=exc.reference))
        console.print(f"[yellow]{stage.name}:[/] {terminal.escape(exc.message)}")
        return None
    except Exception as exc:  # a bug in one stage must not hide the others' results
        records.append(StageRecord(stage.name, stage.command_line, Verdict.FAIL, f"{type(exc).__name__}: {exc}",
                                   round(time.monotonic() - started, 2), error="stage-crashed"))
        console.print(f"[red]stage {stage.name} crashed:[/] {terminal.escape(f'{type(exc).__name__}: {exc}')}")
        return None
    report = measurements.report(measurement, stage.config, result)
    summary = measurement.summary(result)
    records.append(StageRecord(stage.name, stage.command_line, report.verdict, summary,
                               round(time.monotonic() - started, 2), report=report))
    console.print(terminal.stage_line(report.verdict, stage.name, summary, time.monotonic() - started))
    return report


def leftover_check(records: list[StageRecord]) -> StageRecord:
    """After every stage: nothing that this run's stages started (their run ids) is still alive.
    Orphans of other runs on the machine are shown as information: they are not this run's doing."""
    from ..supervision.reaping import leaked
    from ..supervision.procs import survey

    run_ids = _run_ids(records)
    left = sorted({p for rid in run_ids for p in leaked(rid, [])})
    orphans = survey().orphans
    ours = [o for o in orphans if o.run_id in run_ids]
    others = [o for o in orphans if o.run_id not in run_ids]
    summary = f"{len(left)} process(es) of this lab and {len(ours)} orphan(s) of this lab left"
    if others:
        summary += f"; {len(others)} orphan(s) of other runs on this machine, not counted (`ddplab clean`)"
    return StageRecord(LEFTOVERS, "(ddplab run)", Verdict.PASS if not left and not ours else Verdict.FAIL, summary,
                       left_pids=left, orphans=ours, other_orphans=others)


def _run_ids(records: list[StageRecord]) -> set[str]:
    """The run ids this lab's stages started, each stage's own and each drill's, as each record lists them."""
    found: set[str] = set()
    for stage in records:
        results = stage.report.results if stage.report is not None else None
        if isinstance(results, StartsRuns):
            found |= set(results.run_ids())
        elif isinstance(results, InSession) and results.session is not None:
            found.add(results.session.run_id)
    return {rid for rid in found if rid}
