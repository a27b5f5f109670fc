"""Inject -> observe -> judge, shared by every drill; names no particular fault.

``observe`` runs drills/script.py (DDP training broken on purpose) through the same path as the user's script
under `ddplab launch`, so a drill that passes proves what users get, and records what went in and when, what
detected it first and how fast, the culprits ddplab and torchrun name, an error excerpt, processes left behind
and device memory before and after; ``judge`` is the common rule. The fault goes in from the victim rank itself
(the script) or from a controller thread in the launcher, which says when through ``Injections``.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from ..basics import interrupts
from ..supervision import reaping
from ..platform import Platform, flight_recorder
from ..records.core import Verdict
from ..records.drill import DrillOutcome, Injection
from ..records.placement import Placement
from ..records.session import RankState, SessionRecord
from ..basics.rundir import RunDir
from ..job.session import Observer, Session
from ..supervision.job import StragglerPlan
from ..supervision.states import read_states
from . import script
from .mechanisms import classify, excerpt

MEMORY_SLACK_BYTES = 64 << 20  # device-wide "used" memory moves by a few MiB on its own
MEMORY_WAIT_S = 5.0
DETECT_SLACK_S = 5.0  # a fault must be detected within the timeout plus this
READY_COLLECTIVES = 3  # ranks that count collectives are "running" once they completed this many
READY_TIMEOUT_S = 120.0
RUNNING_PHASES = ("running", "in-collective")


@dataclass(frozen=True)
class DrillContext:
    """What one drill gets: the command's config, its name, the platform and placement checked once, the observer."""

    config: Any  # measurements.drill.DrillConfig (the measurement imports this runner: not imported back)
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
        """Across machines, the rendezvous id of one launch of this drill (the same on every machine), so that it
        never meets a previous launch's closing store on the same endpoint."""
        launch = self.config.launch
        if launch.nnodes < 2:
            return launch.rdzv_id
        return f"{launch.rdzv_id or 'drill'}-{self.name}-{label}"

    def run_dir(self, label: str) -> Path | None:
        """A directory of its own for each launch of this drill (one directory holds one run); None: the default."""
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
    states: dict[int, RankState]  # each rank's last status: this machine's, or the whole job's


# ---------------------------------------------------------------------------------------- inject and observe

def observe(ctx: DrillContext, label: str, fault: str, *, settings: dict | None = None,
            controller: Controller | None = None, rank_env: dict[str, str] | None = None,
            stragglers: StragglerPlan | None = StragglerPlan(), **launch_overrides) -> Observation:
    """Run the drill's script under ddplab's launcher and supervisor; measure and judge what happened. ``settings``
    override the script's options, ``launch_overrides`` the launch's; ``rank_env`` is set in every rank."""
    from ..job.policy import plan
    from ..job.session import run_script

    run_dir = ctx.run_dir(label)
    launch = replace(ctx.config.launch, run_dir=str(run_dir) if run_dir else None, rdzv_id=ctx.session_id(label),
                     **launch_overrides)
    placement = plan(launch, ctx.platform)
    injections = Injections()
    with DeviceMemory(ctx.platform) as memory:
        session = run_script("ddplab.drills.script", script_args(ctx, fault, settings or {}), launch,
                             f"drill-{ctx.name}", Observer(ctx.observer.console, live=False),
                             prepared=(ctx.platform, placement), rank_env=rank_env,
                             controller=(lambda run: controller(run, injections)) if controller else None,
                             stragglers=stragglers)
        # every rank's last status this machine knows: the job's store's, overlaid by this machine's files (fresher)
        states = {**session.job_states, **read_states(session.run)}
        leaks = reaping.leaked(session.run.run_id, list(session.run.rank_pids().values()))
        memory_fields = memory.settle()
    record = session.record
    # Only a fault that really went in has a time: ranks that crashed before any fault detected nothing.
    what, inject_at = injected(injections, states, ctx.victim)
    culprits, why = ddplab_culprits(record)
    detected_by, detect_s, text = first_detection(session, inject_at)
    outcome = DrillOutcome(
        drill=ctx.name,
        injected=Injection(what=what, rank=ctx.victim, at=inject_at),
        detected_by=detected_by,
        detect_s=detect_s,
        error_excerpt=excerpt(text),
        culprit_ranks=culprits,
        culprit_reason=why,
        culprit_hosts=dict(record.culprit.hosts) if record.culprit and record.culprit.hosts else None,
        torchrun_root_cause_rank=record.torchrun_root_cause_rank,
        leaked_pids=leaks,
        **memory_fields,
        session=record,
        latencies={r: _latencies(session.run, r) for r in sorted(states)},
        interrupted=record.interrupted or bool(interrupts.requested()),
    )
    return Observation(judge(outcome, ctx.victim, ctx.timeout_s), session, states)


def script_args(ctx: DrillContext, fault: str, overrides: dict) -> list[str]:
    """The drill script's command line: the fault on the victim after a few steps, in a run the fault ends."""
    options = dict(fault=fault, victim=ctx.victim, fault_step=5, steps=100_000, interval=0.01,
                   late_s=ctx.timeout_s + 60, stall_s=3 * ctx.timeout_s + 60, timeout=ctx.timeout_s)
    options.update(overrides)
    return [word for key, value in options.items() for word in (f"--{key.replace('_', '-')}", str(value))]


def injected(injections: Injections, states: dict[int, RankState], victim: int) -> tuple[str | None, float | None]:
    """(what, when) of the fault: the controller's record, else what the victim noted in its status."""
    if injections.at is not None:
        return injections.what, injections.at
    state = states.get(victim)
    return (state.injected, state.injected_at) if state else (None, None)


def _latencies(run: RunDir, rank: int) -> list[float] | None:
    try:
        result = json.loads((run.rank_dir(rank) / script.RESULT_FILE).read_text())
    except (OSError, ValueError):
        return None
    return result.get("latencies_us") if isinstance(result, dict) else None


def first_detection(session: Session, injected_at: float | None) -> tuple[str | None, float | None, str]:
    """(mechanism, seconds after the injection, its error text) of the earliest sign: a hang declared, a rank's
    error, a rank's end."""
    outcome = session.outcome
    signs = [(ev.error_at, classify(ev.error_text) or "rank exception", ev.error_text)
             for ev in outcome.evidence.values() if ev.error_at is not None and ev.error_text]
    signs += [(end.at, "launcher (a rank ended)", f"rank {rank} ended by {end.in_words()}")
              for rank, end in outcome.ends.items() if end.at is not None and not end.ok and not end.by_launcher]
    how, when, text = earliest(session.record, signs)
    detect_s = round(max(0.0, when - injected_at), 2) if when is not None and injected_at is not None else None
    return how, detect_s, text


def earliest(record: SessionRecord | None, signs: list[tuple[float, str, str]]) -> tuple[str | None, float | None,
                                                                                          str]:
    """(mechanism, when, text) of the first sign: a hang in ``record``, or one of ``signs``; else (None, None, "")."""
    hang = [(record.hang.declared_at, "ddplab supervisor", record.hang.reason)] if record and record.hang else []
    if not hang + signs:
        return None, None, ""
    when, how, text = min(hang + signs, key=lambda c: c[0])
    return how, when, text


def ddplab_culprits(record: SessionRecord) -> tuple[list[int], str]:
    """Whom ddplab blames: the judge's culprit, or a machine that vanished."""
    if record.machines_lost and not (record.hang and record.culprit):
        lost = record.machines_lost
        return lost.ranks, f"{', '.join(lost.machines)}: {lost.reason}"
    if record.culprit:
        return list(record.culprit.ranks), record.culprit.reason
    return [], "no culprit named"


# ---------------------------------------------------------------------------------------- judge

def judge(outcome: DrillOutcome, victim: int, timeout_s: float) -> DrillOutcome:
    """The common rule. pass: the fault went in, was detected within timeout + 5 s, the victim was named,
    nothing leaked, and device memory came back where it was measured."""
    return judged(outcome, [
        went_in(outcome),
        detected_in_time(outcome.detected_by, outcome.detect_s, timeout_s),
        (victim in outcome.culprit_ranks, f"the victim, rank {victim}, was not named (named: "
                                          f"{outcome.culprit_ranks or 'nobody'})"),
        nothing_left(outcome.leaked_pids),
        memory_back(outcome),
    ])


def judged(outcome: DrillOutcome, conditions: list[tuple[bool, str]]) -> DrillOutcome:
    """``outcome`` passed where every condition held; else failed, with what each missed one says
    (``conditions``: whether it held, and what it means that it did not)."""
    return with_missed(outcome, [why for held, why in conditions if not held])


def with_missed(outcome: DrillOutcome, missed: list[str]) -> DrillOutcome:
    """``outcome`` failed, for each reason in ``missed``, or passed where there is none."""
    return replace(outcome, verdict=Verdict.FAIL if missed else Verdict.PASS, failed_because=missed or None)


def went_in(outcome: DrillOutcome) -> tuple[bool, str]:
    return outcome.fault_went_in, "the fault never went in"


def detected_in_time(detected_by: str | None, detect_s: float | None, timeout_s: float) -> tuple[bool, str]:
    if detected_by is None:
        return False, "nothing detected it"
    return (detect_s is not None and detect_s <= timeout_s + DETECT_SLACK_S,
            f"detected after {detect_s} s, later than the timeout + {DETECT_SLACK_S:g} s")


def nothing_left(leaked_pids: list[int]) -> tuple[bool, str]:
    return not leaked_pids, f"processes left running: {leaked_pids}"


def memory_back(outcome: DrillOutcome) -> tuple[bool, str]:
    """Where the device memory was measured, it came back."""
    return (outcome.device_mem_before_bytes is None or outcome.memory_back_s is not None,
            "the device memory never came back")


# ---------------------------------------------------------------------------------------- helpers for harnesses

def wait_for_ranks(run: RunDir, count: int, ended: Callable[[], bool] | None = None) -> dict[int, int]:
    """Each rank's pid by global rank, once ``count`` ranks run; {} on timeout or a stop request. Once ``ended()``
    (the launcher exited) the ranks it started, however far they got, rather than waiting for nothing."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    recorded = flight_recorder.records_every_group()
    while time.monotonic() < deadline and not interrupts.requested():
        pids = run.rank_pids()
        if len(pids) >= count and ranks_running(read_states(run), count, recorded):
            return pids
        if ended is not None and ended():
            return run.rank_pids()
        time.sleep(0.2)
    return {}


def ranks_running(states: dict[int, RankState], count: int, recorded: bool) -> bool:
    """``count`` ranks past init that have issued a few collectives (a rank failing just after init is 'running'
    for a moment). Where this torch does not record every group (``recorded``), being in the group is all there
    is to wait for."""
    return len(states) >= count and all(s.phase in RUNNING_PHASES and (
        _issued(s) >= READY_COLLECTIVES
        or (not recorded and s.progress is None and s.seq == 0 and bool(s.in_process_group)))
        for s in states.values())


def _issued(state: RankState) -> int:
    flight = max((p.enqueued for p in (state.progress or {}).values()), default=0)
    return max(state.done, flight)


class DeviceMemory:
    """Device-wide used memory before a drill, and whether it comes back after (None where it cannot be read)."""

    def __init__(self, platform: Platform):
        from ..platform import open_monitor

        self._monitor = open_monitor(platform.spec)
        self.before = self._used()

    def __enter__(self) -> "DeviceMemory":
        return self

    def __exit__(self, *exc) -> None:
        self._monitor.close()

    def settle(self) -> dict:
        """A drill outcome's memory fields: bytes used before and now, and seconds until back within slack."""
        used = back_s = None
        if self.before is not None:
            t0 = time.monotonic()
            used = self._used()
            while (used is not None and used > self.before + MEMORY_SLACK_BYTES
                   and time.monotonic() - t0 < MEMORY_WAIT_S):
                time.sleep(0.1)
                used = self._used()
            if used is not None and used <= self.before + MEMORY_SLACK_BYTES:
                back_s = round(time.monotonic() - t0, 2)
        return dict(device_mem_before_bytes=self.before, device_mem_after_bytes=used, memory_back_s=back_s)

    def _used(self) -> int | None:
        sample = self._monitor.sample()
        return sum(sample.device_used_bytes.values()) if sample.device_used_bytes else None
