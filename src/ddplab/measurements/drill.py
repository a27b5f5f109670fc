"""Fault drills: reproduce a fault on purpose, measure how the stack reacts, and show that ddplab's
supervision names the right rank and leaves nothing behind (drills/ has one module per drill).

Each drill judges itself by its own rule (drills/runner.py has the common one); the check rows are one
per drill, plus a failing row when a stop signal cut the drills short.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from .. import drills
from ..basics import interrupts
from ..basics.cli_options import argv_of, check_fields, nested, option
from ..records.config import LaunchOptions
from ..errors import UsageError
from ..basics.validators import require
from ..records import Check, Verdict
from ..records.drill import DrillOutcome, DrillRecord
from ..basics.observer import QUIET, Observer

NAME = "drill"
SUMMARY = "fault drills: kill a rank or the launcher, Ctrl+C, late/stalled/straggling/desynced/OOM rank"
LAUNCHERS = ("ddplab", "torchrun")
TIMEOUT_S = 10.0


@dataclass(frozen=True, kw_only=True)
class DrillConfig:
    """Fault drills: which ones, the victim, and where their ranks start. ``--timeout`` is both the process-group
    timeout and the hang timeout, because every drill is judged against it; ``--hang-timeout`` can only be quicker."""

    launch: LaunchOptions = nested(lambda: LaunchOptions(timeout_s=TIMEOUT_S), json={"flatten": True}, help={
        "timeout_s": "Process-group timeout and ddplab's hang timeout, in seconds: every drill is judged against it.",
        "hang_timeout_s": "A hang timeout shorter than --timeout; default: --timeout."})
    drills: tuple[str, ...] = option(metavar="NAME", parse=lambda text, flag: drills.select(text),
                                     listed=lambda: (*drills.DRILLS, "short", "all"))
    """The drills to run, in order: names separated by commas (kill-rank works too), 'short' (the set `ddplab run`
    uses) or 'all'."""
    victim: int | None = option("--victim", default=None)
    """GLOBAL rank the fault goes into; default: the last rank of the job (nproc x nnodes - 1)."""
    launcher: str = option("--launcher", default="ddplab", choices=LAUNCHERS)
    """kill_launcher only: ddplab's own launcher, or plain torchrun for comparison."""

    def __post_init__(self):
        require(bool(self.drills), "invalid-drill", "no drill named: give one of the drills, 'short' or 'all'")
        object.__setattr__(self, "drills", tuple(drills.canonical(name) for name in self.drills))
        launch = self.launch
        world = launch.nproc * launch.nnodes
        job = f"--nproc {launch.nproc}" + (f" x --nnodes {launch.nnodes}" if launch.nnodes > 1 else "")
        require(launch.started_by is None, "not-under-torchrun",
                "a drill starts and kills launchers of its own: run `ddplab drill` once per machine, not as "
                "torchrun's workers")
        require(world >= 2, "drill-needs-ranks", f"{job}: a drill needs at least 2 ranks")
        victim = world - 1 if self.victim is None else self.victim
        require(isinstance(victim, int) and not isinstance(victim, bool) and 0 <= victim < world, "invalid-victim",
                f"--victim {victim} is not a rank of {job} (valid: 0 to {world - 1})")
        object.__setattr__(self, "victim", victim)
        check_fields(self)
        hang = launch.timeout_s if launch.hang_timeout_s is None else min(launch.timeout_s, launch.hang_timeout_s)
        object.__setattr__(self, "launch", replace(launch, hang_timeout_s=hang))

    to_argv = argv_of  # the command line that gives this config back


Config, Record = DrillConfig, DrillRecord


def run(config: DrillConfig, observer: Observer = QUIET) -> DrillRecord:
    """Every drill of ``config`` in order; a stop signal between drills ends them with a partial record."""
    from ..job.session import prepare

    from ..drills.runner import DrillContext

    for name in config.drills:
        check_drill_dir(config.launch.run_dir, name)
    platform, placement = prepare(config.launch)  # refuse a bad setup before the first drill
    console = observer.console
    outcomes = []
    for name in config.drills:
        if interrupts.requested():  # Ctrl+C/SIGTERM: the drills run so far make a partial report
            break
        if console is not None:
            console.rule(f"drill: {name}")
        outcome = run_one(DrillContext(config, name, platform, placement, observer))
        outcomes.append(outcome)
        if console is not None:
            console.print(f"drill {name}: {outcome.verdict.value} ({one_line(outcome)})", markup=False)
    return DrillRecord(backend=placement.backend, backend_reason=placement.backend_reason,
                       shared_device=placement.shared_device, drills=outcomes,
                       interrupted=bool(interrupts.requested()), platform=platform)


def run_one(ctx) -> DrillOutcome:
    """One drill, with its pass condition; a drill that crashes fails without hiding the others' results
    (Ctrl+C is no Exception: it stops them all)."""
    module = drills.get(ctx.name)
    try:
        outcome = module.run(ctx)
    except Exception as exc:
        outcome = DrillOutcome(drill=ctx.name, verdict=Verdict.FAIL, error=f"{type(exc).__name__}: {exc}")
    return replace(outcome, expect=module.EXPECT)


def check_drill_dir(run_dir: str | None, name: str) -> None:
    """Each drill's runs go to <run-dir>/<drill>/: refuse one that already holds runs (exit 2)."""
    from ..basics.files import check_output_dir

    if not run_dir:
        return
    drill_dir = Path(run_dir) / name
    check_output_dir(drill_dir, "--run-dir")
    if drill_dir.is_dir() and any(drill_dir.iterdir()):
        raise UsageError("run-dir-in-use", f"--run-dir {run_dir} already holds runs of drill {name} ({drill_dir}); "
                                           f"every run needs a directory of its own: give a new one")


def one_line(outcome: DrillOutcome) -> str:
    """What the drill saw, in the words of its check row."""
    if outcome.error:
        return f"crashed: {outcome.error}"
    culprit = outcome.culprits_in_words() if outcome.culprit_ranks else "none named"
    return f"{detection(outcome)}; culprit {culprit}; leaked {len(outcome.leaked_pids)}"


def detection(outcome: DrillOutcome) -> str:
    """How the fault was first seen, and how fast; or why nothing was (an interrupted drill, a fault that
    never went in): words, never a missing value."""
    if outcome.detected_by is None:
        if outcome.interrupted:
            return "interrupted before anything was detected"
        if outcome.injected is not None and not outcome.fault_went_in:
            return "the fault never went in, so nothing was detected"
        return "not detected"
    after = f" in {outcome.detect_s} s" if outcome.detect_s is not None else " (time unknown)"
    return f"detected by {outcome.detected_by}{after}"


def checks(record: DrillRecord) -> list[Check]:
    rows = [Check(f"drill {o.drill}", o.verdict, one_line(o), o.expect,
                  f"it missed: {'; '.join(o.failed_because)}" if o.failed_because
                  else "the stack reacted to the fault as it must",
                  "none" if o.verdict is Verdict.PASS else "see the drill's error excerpt and run directory")
            for o in record.drills]
    if record.interrupted:
        rows.append(Check("drills completed", Verdict.FAIL, "interrupted: partial report", "every drill runs",
                          "a stop signal (Ctrl+C, SIGTERM) ended the drills early", "run the drills again"))
    return rows


def summary(record: DrillRecord) -> str:
    return ", ".join(f"{o.drill} {o.verdict.value}" + (f" ({o.detect_s} s)" if o.detect_s is not None else "")
                     for o in record.drills)
