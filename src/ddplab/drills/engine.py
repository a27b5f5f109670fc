"""Inject -> observe -> judge, shared by every drill; names no particular fault.

A drill that runs its ranks under ddplab's own launcher and supervisor (``observe``) records what was
injected and when, which mechanism detected it first and how long that took (``detect_s``), the culprit
ranks ddplab names and the rank torchrun would blame, an excerpt of the real error text, processes left
behind (must be none), device memory before and after (back to baseline on NVIDIA within 5 s), and a
verdict by the common rule (``judge``). Ranks are named by their GLOBAL rank throughout.

The fault goes in either from the victim rank itself (workloads/drill.py: late, stall, desync, oom) or from
a controller thread in the launcher (kill_rank's kill, straggler's pauses), which says when it really went
in through ``Injections``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from .. import interrupts, procs, status
from ..config import DrillConfig
from ..platform import Platform
from ..policy import Placement
from ..records.core import Verdict
from ..records.drill import DrillOutcome, DrillRankResult, DrillSettings, Injection
from ..records.session import RankState, SessionRecord
from ..rundir import RunDir
from ..session import Observer, Session, Workload
from .mechanisms import OUT_OF_MEMORY, classify, excerpt

MEMORY_SLACK_BYTES = 64 << 20  # device-wide "used" memory moves by a few MiB on its own
MEMORY_WAIT_S = 5.0
DETECT_SLACK_S = 5.0  # a fault must be detected within the timeout plus this
READY_COLLECTIVES = 3  # ranks that count collectives are "running" once they completed this many
READY_TIMEOUT_S = 120.0
RUNNING_PHASES = ("running", "in-collective")


@dataclass(frozen=True)
class DrillContext:
    """What one drill gets: the command's config, its own name (its runs go to <run dir>/<name>/), the
    platform and placement checked once before the first drill, and who watches."""

    config: DrillConfig
    name: str
    platform: Platform
    placement: Placement
    observer: Observer

    @property
    def victim(self) -> int:
        return self.config.victim

    @property
    def timeout_s(self) -> float:
        return self.config.launch.timeout_s

    @property
    def local_count(self) -> int:
        """Ranks this machine's launcher starts."""
        return self.placement.nproc

    def session_id(self, label: str) -> str | None:
        """A job across machines: the rendezvous id of one launch of this drill (the same on every machine,
        which runs the same drills in the same order), so that each launch meets its own, never a previous
        launch's closing store on the same endpoint (rendezvous.meet). None on one machine."""
        launch = self.config.launch
        if launch.nnodes < 2:
            return launch.rdzv_id
        return f"{launch.rdzv_id or 'drill'}-{self.name}-{label}"

    def run_dir(self, label: str) -> Path | None:
        """A directory of its own for each launch of this drill (stall and straggler launch twice), because
        one directory holds one run (rundir.py); None: the launcher's default place."""
        base = self.config.launch.run_dir
        return Path(base) / self.name / label if base else None


class Injections:
    """What a launcher-side controller injected and when, written from its thread; the first one counts."""

    def __init__(self):
        self._lock = threading.Lock()
        self.what: str | None = None
        self.at: float | None = None

    def record(self, what: str, at: float) -> None:
        with self._lock:
            if self.at is None:
                self.what, self.at = what, at


Controller = Callable[[RunDir, Injections], None]


@dataclass
class Observation:
    """One drill session observed and judged by the common rule, and what a drill may read further."""

    outcome: DrillOutcome
    session: Session
    states: dict[int, RankState]  # each rank's last status: this machine's, or the whole job's (job_states)


# ---------------------------------------------------------------------------------------- inject and observe

def observe(ctx: DrillContext, label: str, fault: str, *, settings: dict | None = None,
            controller: Controller | None = None, rank_env: dict[str, str] | None = None,
            **launch_overrides) -> Observation:
    """Run the drill workload under ddplab's launcher and supervisor; measure and judge what happened.

    ``settings`` override the workload's (DrillSettings), ``launch_overrides`` the launch options (e.g. a
    memory cap), ``rank_env`` is set in every rank before init (the blocking-wait switch).
    """
    from ..policy import plan
    from ..session import run_workload

    launch = replace(ctx.config.launch, run_dir=_text(ctx.run_dir(label)), rdzv_id=ctx.session_id(label),
                     **launch_overrides)
    placement = plan(launch, ctx.platform)
    workload = Workload("drill", _settings(ctx, fault, settings or {}))
    injections = Injections()
    with DeviceMemory(ctx.platform) as memory:
        session = run_workload(workload, launch, f"drill-{ctx.name}", Observer(ctx.observer.console, live=False),
                               prepared=(ctx.platform, placement), rank_env=rank_env,
                               controller=(lambda run: controller(run, injections)) if controller else None)
        states = job_states(session)
        leaks = procs.leaked(session.run.run_id, list(session.run.rank_pids().values()))
        after, back_s = memory.settle()
    record = session.record
    # Only a fault that really went in has a time. A fallback (the start time) once let ranks that crashed
    # before any fault pass as a detection of it, and judge() requires the time.
    what, inject_at = injected(injections, states, ctx.victim)
    culprits, why = ddplab_culprits(record, states, ctx.local_count,
                                    expected=list(range(record.world_size)) if session.job_states else None)
    detected_by, detect_s, text = first_detection(record, states, session.ended_at, inject_at, ctx.victim)
    outcome = DrillOutcome(
        drill=ctx.name,
        injected=Injection(what=what, rank=ctx.victim, at=inject_at),
        detected_by=detected_by,
        detect_s=detect_s,
        error_excerpt=excerpt(text),
        culprit_ranks=culprits,
        culprit_reason=why,
        culprit_hosts={r: states[r].machine if r in states else None for r in culprits} if session.job_states
        else None,
        torchrun_root_cause_rank=record.torchrun_root_cause_rank,
        leaked_pids=leaks,
        device_mem_before_bytes=memory.before,
        device_mem_after_bytes=after,
        memory_back_s=back_s,
        session=record,
        latencies={r.rank: _latencies(r.result) for r in session.returns},
        interrupted=record.interrupted or bool(interrupts.requested()),
    )
    return Observation(replace(outcome, verdict=judge(outcome, ctx.victim, ctx.timeout_s)), session, states)


def job_states(session: Session) -> dict[int, RankState]:
    """Every rank's last status this machine knows: the whole job's from its store where it spans machines
    (a victim on another machine says there what went in, on this machine's clock), this machine's own
    ranks from their files (written last, so the freshest)."""
    return {**session.job_states, **status.read_all(session.run)}


def injected(injections: Injections, states: dict[int, RankState], victim: int) -> tuple[str | None, float | None]:
    """(what, when) of the fault: the controller's record, else what the victim rank itself wrote in its
    status; (None, None) when neither did, whatever the other ranks wrote."""
    if injections.at is not None:
        return injections.what, injections.at
    state = states.get(victim)
    return (state.injected, state.injected_at) if state else (None, None)


def _settings(ctx: DrillContext, fault: str, overrides: dict) -> DrillSettings:
    defaults = dict(fault=fault, victim=ctx.victim, inject_at=5, steps=100_000, numel=1024, interval_s=0.01,
                    late_s=ctx.timeout_s + 60, stall_s=3 * ctx.timeout_s + 60)
    return DrillSettings(**{**defaults, **overrides})


def _latencies(result) -> list[float] | None:
    return result.latencies_us if isinstance(result, DrillRankResult) else None


def _text(path: Path | None) -> str | None:
    return str(path) if path else None


def first_detection(record: SessionRecord, states: dict[int, RankState], ended_at: float,
                    injected_at: float | None, victim: int) -> tuple[str | None, float | None, str]:
    """(mechanism, seconds after the injection, its error text): the earliest of ddplab's supervisor, a
    rank's own error, the launcher tearing the group down."""
    candidates = []
    if record.hang:
        candidates.append((record.hang.detected_at, "ddplab supervisor", record.hang.reason))
    for rank, state in states.items():
        if state.failed_at and rank != victim:
            candidates.append((state.failed_at, classify(state.error) or "rank exception", state.error or ""))
    for rank in record.ranks:
        if rank.failure and rank.failure.signal and not record.hang:
            candidates.append((ended_at, "launcher teardown", f"rank {rank.rank} died by {rank.failure.signal}"))
    victim_state = states.get(victim)
    if victim_state and victim_state.failed_at:
        candidates.append((victim_state.failed_at, classify(victim_state.error) or "rank exception",
                           victim_state.error or ""))
    if not candidates:
        return None, None, ""
    when, how, text = min(candidates, key=lambda c: c[0])
    detect_s = round(max(0.0, when - injected_at), 2) if injected_at is not None else None
    return how, detect_s, text


def ddplab_culprits(record: SessionRecord, states: dict[int, RankState], local_count: int,
                    expected: list[int] | None = None) -> tuple[list[int], str]:
    """Whom ddplab blames: the supervisor's verdict, a machine that vanished, a rank killed from outside, a
    rank out of memory, or the evidence of the status the ranks left (``expected``: every rank of the job,
    where ``states`` hold the whole job's)."""
    if record.hang:
        return list(record.hang.culprit_ranks), record.hang.reason
    if record.machines_lost:
        lost = record.machines_lost
        return lost.ranks, f"{', '.join(lost.machines)}: {lost.reason}"
    killed = sorted(r.rank for r in record.ranks if r.failure and r.failure.signal == "SIGKILL")
    if killed:
        return killed, "died by SIGKILL while the others were healthy"
    oom = sorted(r for r, s in states.items() if classify(s.error) == OUT_OF_MEMORY)
    if oom:
        return oom, "ran out of memory"
    return status.name_culprits_after_exit(states, local_count, expected)


# ---------------------------------------------------------------------------------------- judge

def judge(outcome: DrillOutcome, victim: int, timeout_s: float) -> Verdict:
    """The common rule. pass: the fault went in, was detected within timeout + 5 s, the victim was named,
    nothing leaked, and device memory came back where it was measured."""
    memory_measured = outcome.device_mem_before_bytes is not None
    ok = (outcome.fault_went_in
          and outcome.detected_by is not None and detected_within(outcome.detect_s, timeout_s)
          and victim in outcome.culprit_ranks
          and not outcome.leaked_pids
          and (not memory_measured or outcome.memory_back_s is not None))
    return Verdict.PASS if ok else Verdict.FAIL


def detected_within(detect_s: float | None, timeout_s: float) -> bool:
    return detect_s is not None and detect_s <= timeout_s + DETECT_SLACK_S


def both_pass(*verdicts: Verdict) -> Verdict:
    return Verdict.PASS if all(v is Verdict.PASS for v in verdicts) else Verdict.FAIL


# ---------------------------------------------------------------------------------------- helpers for harnesses

def wait_for_ranks(run: RunDir, count: int, timeout_s: float = READY_TIMEOUT_S) -> dict[int, int]:
    """Each rank's pid by global rank, once ``count`` ranks run (those that count collectives have finished a
    few); {} on timeout or when a stop was requested."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not interrupts.requested():
        pids = run.rank_pids()
        if len(pids) >= count and ranks_running(status.read_all(run), count):
            return pids
        time.sleep(0.2)
    return {}


def ranks_running(states: dict[int, RankState], count: int) -> bool:
    """``count`` ranks past init; ranks that count collectives have finished a few."""
    return len(states) >= count and all(
        s.phase in RUNNING_PHASES and (s.seq == 0 or s.done >= READY_COLLECTIVES) for s in states.values())


class DeviceMemory:
    """Device-wide used memory before a drill, and whether it comes back after (None where the platform
    cannot read it: the host)."""

    def __init__(self, platform: Platform):
        from ..platform import open_monitor

        self._monitor = open_monitor(platform.spec)
        self.before = self._used()

    def __enter__(self) -> "DeviceMemory":
        return self

    def __exit__(self, *exc) -> None:
        self._monitor.close()

    def settle(self) -> tuple[int | None, float | None]:
        """(bytes used now, seconds until back within slack of the baseline; None if it never came back)."""
        if self.before is None:
            return None, None
        t0 = time.monotonic()
        used = self._used()
        while used is not None and used > self.before + MEMORY_SLACK_BYTES and time.monotonic() - t0 < MEMORY_WAIT_S:
            time.sleep(0.1)
            used = self._used()
        back = used is not None and used <= self.before + MEMORY_SLACK_BYTES
        return used, (round(time.monotonic() - t0, 2) if back else None)

    def _used(self) -> int | None:
        sample = self._monitor.sample()
        return sum(sample.device_used_bytes.values()) if sample.device_used_bytes else None
