"""The interrupt and kill_launcher drills' harness: a separate launcher process (ddplab's `train`, or
plain torchrun) that the drill can signal the way a user or a scheduler would, and end with all of its
ranks whatever happens.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from ..basics import interrupts
from ..supervision import guardian, reaping
from ..records.train import TrainConfig
from ..records.drill import ChildLauncherDetails, DrillOutcome, Injection
from ..basics.rundir import RunDir
from . import runner
from .mechanisms import excerpt

CHILD_STEPS = 1_000_000  # far more than the drill waits for: the child trains until it is signalled
EXIT_WAIT_S = 60.0
# for the guardian of a launcher that died: it settles, ends what is left with two grace periods, stops daemons
GUARDIAN_WAIT_S = guardian.SETTLE_S + 2 * guardian.GRACE_S + guardian.DAEMON_STOP_S + 2


def start(argv: list[str]) -> subprocess.Popen:
    """A separate ddplab (or torchrun) process the drill can kill like a user would, leading a session of its own
    (a Ctrl+C meant for this drill does not reach it, and ``end`` ends its whole group)."""
    return subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def end(child: subprocess.Popen) -> None:
    """End a child launcher with everything in its process group, then reap it: an unreaped launcher's pid still
    answers kill(pid, 0), and a rank's parent-death guard would take it for alive."""
    if child.returncode is None:  # not reaped yet: its pid, the group's id, cannot have been reused
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def wait_exit(child: subprocess.Popen, timeout_s: float) -> int | None:
    """The child's exit code once it exits (reaped); None after ``timeout_s`` or on a stop request."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not interrupts.requested():
        if child.poll() is not None:
            return child.returncode
        time.sleep(0.05)
    return child.poll()


def wait_for_its_guardian(child_run: RunDir | None) -> None:
    """Once the child launcher is gone: its guardian, which sweeps after a launcher that died (SIGKILL), is part of
    what the drill started, and done before the drill looks for what was left."""
    if child_run is not None:
        guardian.wait_finished(child_run.path, child_run.run_id, GUARDIAN_WAIT_S)


def wait_for_run(path: Path, child: subprocess.Popen) -> RunDir | None:
    """The run the child launcher claims at ``path``; None if it exits, a stop is requested, or time runs out."""
    deadline = time.monotonic() + runner.READY_TIMEOUT_S
    while time.monotonic() < deadline and not interrupts.requested() and child.poll() is None:
        run = RunDir.existing(path)
        if run is not None:
            return run
        time.sleep(0.1)
    return None


def signal_train(ctx: runner.DrillContext, sig: int, detected_by: str) -> DrillOutcome:
    """Start `ddplab train` as a separate launcher, send it ``sig`` once its ranks run, and measure when they were
    gone, the launcher's exit and report, and what was left; the verdict is the caller's."""
    run_dir = RunDir.create(ctx.run_dir(ctx.name), f"drill-{ctx.name}").path
    child_dir, report = run_dir / "launcher", run_dir / "launcher-report.json"
    train = TrainConfig(launch=replace(ctx.config.launch, run_dir=str(child_dir), hang_timeout_s=None),
                        steps=CHILD_STEPS)
    pids: list[int] = []
    child_run = run_id = injected_at = gone_at = child_exit = None
    with runner.DeviceMemory(ctx.platform) as memory:
        child = start(["-m", "ddplab", "train", *train.to_argv(), "--json", str(report)])
        try:
            child_run = wait_for_run(child_dir, child)
            pids = sorted(runner.wait_for_ranks(child_run, ctx.local_count).values()) if child_run else []
            run_id = child_run.run_id if child_run else None
            if pids and not interrupts.requested():
                injected_at = time.time()
                os.kill(child.pid, sig)
                gone_at = reaping.wait_gone(pids, ctx.timeout_s + 10, stop=interrupts.requested)
                child_exit = wait_exit(child, EXIT_WAIT_S)
        finally:
            if child_exit is None:  # never signalled, stuck, or this drill is being stopped: end it and its ranks
                end(child)
        wait_for_its_guardian(child_run)
        leaks = reaping.leaked(run_id, pids)
        reaping.end_processes(leaks)
        log = child.stdout.read() if child.stdout else ""  # after the leaks end: they may hold the pipe open
        memory_fields = memory.settle()
    return DrillOutcome(
        drill=ctx.name,
        injected=Injection(what=f"{signal.Signals(sig).name} to the launcher (pid {child.pid})", rank="launcher",
                           at=injected_at),
        detected_by=detected_by if gone_at else None,
        detect_s=round(gone_at - injected_at, 2) if gone_at else None,
        error_excerpt=excerpt(log),
        culprit_reason="the launcher itself was the victim",
        leaked_pids=leaks,
        **memory_fields,
        run_dir=str(run_dir),
        run_id=run_id,
        interrupted=bool(interrupts.requested()),
        details=ChildLauncherDetails(launcher_exit_code=child_exit, report_written=report.exists(), rank_pids=pids),
    )
