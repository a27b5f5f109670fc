"""The harness of the drills between machines (kill_node, partition): every machine runs the same `ddplab drill
NAME --nnodes N ...`, each starting its part of one job as a separate launcher (`ddplab train`), so that a drill
can kill or freeze a whole machine's launcher and ranks without killing itself.

A drill can act only on its own machine's processes: the machine that holds the victim rank injects into its own
launcher and ranks, and the survivors check their launcher's report names the victim's machine and all of its
ranks, within the timeout of when it was last heard (their own clock), with nothing of theirs left running.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from ..basics import interrupts
from ..supervision import reaping
from ..basics.files import write_text_atomic
from ..records.train import TrainConfig
from ..records.codec import RecordError
from ..records.core import Report, Verdict
from ..records.drill import DrillOutcome, Injection, NodeDetails
from ..records.session import RankState, SessionRecord
from ..basics.rundir import RunDir
from ..supervision.states import read_states
from . import child_launcher, runner
from .mechanisms import classify, excerpt

SURVIVOR_MARGIN_S = 60.0  # on top of the victim's hold, for the survivors' launcher to tear down and report


@dataclass(frozen=True)
class NodeFault:
    """What the victim's machine does to its own launcher and ranks, and how long it holds them before ending them."""

    inject: Callable[[subprocess.Popen, list[int]], str]  # (the launcher, its rank pids) -> what was done
    hold_s: Callable[[runner.DrillContext], float]


def run(ctx: runner.DrillContext, fault: NodeFault) -> DrillOutcome:
    """The drill on this machine: the victim's machine injects, every other machine observes."""
    if ctx.config.launch.nnodes < 2:
        return DrillOutcome(drill=ctx.name, verdict=Verdict.SKIP,
                            culprit_reason="a drill between machines needs a job across machines: run it on each "
                                           "machine with --nnodes 2 or more and the same --rdzv-endpoint")
    run_dir = RunDir.create(ctx.run_dir(ctx.name), f"drill-{ctx.name}").path
    child_dir, report = run_dir / "launcher", run_dir / "launcher-report.json"
    train = TrainConfig(launch=replace(ctx.config.launch, run_dir=str(child_dir), rdzv_id=ctx.session_id(ctx.name)),
                        steps=child_launcher.CHILD_STEPS)
    pids: dict[int, int] = {}
    child_run = None
    run_id = injected_at = what = gone_at = child_exit = None
    phases = _Phases(run_dir / "harness-phases.json")
    with runner.DeviceMemory(ctx.platform) as memory:
        child = child_launcher.start(["-m", "ddplab", "train", *train.to_argv(), "--json", str(report)])
        try:
            child_run = child_launcher.wait_for_run(child_dir, child)
            pids = runner.wait_for_ranks(child_run, ctx.local_count,
                                         ended=lambda: child.poll() is not None) if child_run else {}
            phases.note(("ranks running" if child.poll() is None else "launcher exited first") if pids else "no ranks")
            run_id = child_run.run_id if child_run else None
            victim_here = ctx.victim in pids and child.poll() is None  # a launcher already gone takes no fault
            if victim_here and not interrupts.requested():
                injected_at, what = time.time(), fault.inject(child, sorted(pids.values()))
                _hold(fault.hold_s(ctx))
                stop_group(signal.SIGKILL)(child, sorted(pids.values()))  # SIGKILL ends stopped ones too
                gone_at = reaping.wait_gone(sorted(pids.values()), ctx.timeout_s + 10, stop=interrupts.requested)
                child_exit = child_launcher.wait_exit(child, 10)
            elif pids:
                child_exit = child_launcher.wait_exit(child, fault.hold_s(ctx) + ctx.timeout_s + SURVIVOR_MARGIN_S)
            phases.note("launcher exited" if child_exit is not None else "launcher still running")
        finally:
            if child_exit is None:  # stuck, never started, or this drill is being stopped: end it and its ranks
                child_launcher.end(child)
                phases.note("launcher ended by the harness")
        child_launcher.wait_for_its_guardian(child_run)
        leaks = reaping.leaked(run_id, list(pids.values()))
        reaping.end_processes(leaks)
        phases.note("leftovers ended")
        log = child.stdout.read() if child.stdout else ""
        phases.note("launcher output read")
        memory_fields = memory.settle()
        phases.note("device memory settled")
    common = dict(drill=ctx.name, leaked_pids=leaks, **memory_fields, run_dir=str(run_dir), run_id=run_id,
                  interrupted=bool(interrupts.requested()))
    if injected_at is not None:
        return _as_victim(ctx, what, injected_at, gone_at, child_exit, sorted(pids), common)
    return _as_survivor(ctx, report, child_dir, child_exit, sorted(pids), log, common)


class _Phases:
    """When each step of this machine's part of the drill ended, written as it goes: where the time went when the
    machines fell out of step. Diagnostic only: a failed write is ignored."""

    def __init__(self, path: Path):
        self.path, self.started, self.steps = path, time.time(), []

    def note(self, step: str) -> None:
        self.steps.append({"step": step, "after_s": round(time.time() - self.started, 2)})
        with contextlib.suppress(OSError):
            write_text_atomic(self.path, json.dumps({"started": self.started, "steps": self.steps}), durable=False)


def stop_group(sig: int) -> Callable[[subprocess.Popen, list[int]], str]:
    """Send ``sig`` to the child launcher's process group and to each rank by the pid it wrote in the child's run
    directory (the evidence that it is ours)."""
    def inject(launcher: subprocess.Popen, rank_pids: list[int]) -> str:
        if launcher.returncode is None:  # not reaped: its pid, the group's id, cannot have been reused
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(launcher.pid, sig)
        for pid in rank_pids:
            reaping.signal_quietly(pid, sig)
        return (f"{signal.Signals(sig).name} to this machine's launcher (pid {launcher.pid}) and its "
                f"{len(rank_pids)} rank(s) (pids {rank_pids})")
    return inject


def _hold(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not interrupts.requested():
        time.sleep(0.1)


# ---------------------------------------------------------------------------------------- judging

def _as_victim(ctx: runner.DrillContext, what: str, injected_at: float, gone_at: float | None,
               child_exit: int | None, ranks: list[int], common: dict) -> DrillOutcome:
    """The victim's machine: the fault went in, and nothing of its part was left (the others judge the rest)."""
    outcome = DrillOutcome(
        **common,
        injected=Injection(what=what, rank=ctx.victim, at=injected_at),
        detected_by="not judged here: this machine was the victim (the other machines name it)",
        culprit_reason=f"this machine held the victim rank {ctx.victim} (its ranks {ranks}); its launcher and "
                       f"ranks were gone {round(gone_at - injected_at, 2) if gone_at else 'never'} s after",
        details=NodeDetails(role="victim", machine=None, machine_ranks=ranks, launcher_exit_code=child_exit,
                            report_written=False))
    return runner.judged(outcome, [(gone_at is not None, "this machine's launcher and ranks were never gone"),
                                   runner.nothing_left(common["leaked_pids"])])


def _as_survivor(ctx: runner.DrillContext, report: Path, child_dir: Path, child_exit: int | None,
                 ranks: list[int], log: str, common: dict) -> DrillOutcome:
    """A surviving machine: its launcher's report must name the victim's machine and every rank of it in time, and
    nothing of this machine may be left."""
    session = _session_of(report)
    local = read_states(RunDir.existing(child_dir)) if RunDir.existing(child_dir) else {}
    job = {**(dict(session.hang.snapshot) if session and session.hang else {}), **local}
    machine, machine_ranks = _victims_machine(session, job, ctx.victim)
    last_heard = _last_heard(session, job, machine, machine_ranks)
    # the first sign on this machine: its supervisor's hang, or one of its ranks failing (a peer lost)
    detected_by, detected_at, text = runner.earliest(session, [
        (s.failed_at, classify(s.error) or "rank exception", s.error or "") for s in local.values() if s.failed_at])
    culprits, reason, hosts = _named(session)
    detect_s = round(detected_at - last_heard, 2) if detected_at and last_heard else None
    outcome = DrillOutcome(
        **common,
        injected=Injection(what=f"machine {machine or '?'} (ranks {machine_ranks}) stopped answering: the drill "
                                f"there injected it" if machine else None, rank=ctx.victim, at=last_heard),
        detected_by=detected_by, detect_s=detect_s, error_excerpt=excerpt(text or log),
        culprit_ranks=culprits, culprit_reason=reason, culprit_hosts=hosts or None,
        torchrun_root_cause_rank=session.torchrun_root_cause_rank if session else None, session=session,
        details=NodeDetails(role="survivor", machine=machine, machine_ranks=machine_ranks,
                            launcher_exit_code=child_exit, report_written=session is not None))
    return runner.judged(outcome, [
        (last_heard is not None, "the victim's machine was never heard from"),
        runner.detected_in_time(detected_by, detect_s, ctx.timeout_s),
        (machine is not None, "no machine was found to hold the victim"),
        (sorted(culprits) == machine_ranks and all(hosts.get(r) == machine for r in culprits),
         f"named {culprits} on {sorted(set(hosts.values())) or 'no machine'}, not that machine's ranks "
         f"{machine_ranks} on {machine}"),
        runner.nothing_left(common["leaked_pids"])])


def _session_of(report: Path) -> SessionRecord | None:
    """The session of the survivors' launcher: its `ddplab train` report, read as train's."""
    from ..platform import Platform
    from ..records.train import TrainRecord

    def train_types(command: str, where: str):
        if command != "train":
            raise RecordError(where, "a train report", command)
        return TrainConfig, TrainRecord, Platform

    try:
        return Report.from_json(json.loads(report.read_text()), types_for=train_types).results.session
    except (OSError, ValueError, RecordError, AttributeError):
        return None


def _victims_machine(session: SessionRecord | None, job: dict[int, RankState],
                     victim: int) -> tuple[str | None, list[int]]:
    """The machine that held the victim rank, and all of its ranks, as the job's store said."""
    if session is not None and session.machines_lost:
        for machine, ranks in session.machines_lost.machines.items():
            if victim in ranks:
                return machine, sorted(ranks)
    state = job.get(victim)
    if state is None or state.machine is None:
        return None, []
    return state.machine, sorted(r for r, s in job.items() if s.machine == state.machine)


def _last_heard(session: SessionRecord | None, job: dict[int, RankState], machine: str | None,
                ranks: list[int]) -> float | None:
    """When the victim's machine was last heard here (this machine's clock): the fault went in no later."""
    if machine is None:
        return None
    if session is not None and session.machines_lost and machine in session.machines_lost.last_heard:
        return session.machines_lost.last_heard[machine]
    beats = [job[r].heartbeat for r in ranks if r in job]
    return max(beats) if beats else None


def _named(session: SessionRecord | None) -> tuple[list[int], str, dict[int, str | None]]:
    """Whom this machine's launcher named, with their machines: its supervisor's hang, or the machines lost."""
    if session is None:
        return [], "the launcher wrote no report", {}
    if session.hang and session.culprit:
        return list(session.culprit.ranks), session.culprit.reason, dict(session.culprit.hosts or {})
    if session.machines_lost:
        lost = session.machines_lost
        return lost.ranks, lost.reason, {r: m for m, ranks in lost.machines.items() for r in ranks}
    return [], "neither a hang nor a lost machine was named", {}
