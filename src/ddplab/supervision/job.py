"""One supervised job, from meeting to culprit: the same path for a lab stage, a drill and `ddplab launch`.

    meeting (where it listens) -> guardian -> sampler + watcher around elastic -> how each rank ended
    -> what was left (ended) -> evidence -> the judge's culprit

``run_job`` takes what differs between them as a ``JobSpec`` and returns a ``JobOutcome``, which the lab and
`ddplab launch` turn into their records. elastic runs in the calling thread, which should be the launcher's main
thread: the ranks' PR_SET_PDEATHSIG fires when the thread that started them ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, fields
from typing import Any, Callable, ContextManager

from ..basics import interrupts
from ..cluster.endpoint import StoreWaitStopped
from ..cluster.exposure import CannotListen, Meeting
from ..basics.files import write_text_atomic
from ..basics.proc_stat import start_ticks
from ..records.session import Listened
from ..records.stragglers import StragglerReport
from ..records.supervision import Culprit, Hang, LeftProcess, MachineLoss, RankEnd, RankState
from ..basics.rundir import MARKER_ENVS, RunDir
from . import arrivals, elastic, guardian, judge
from .evidence import RankEvidence, gather, requested
from .family import set_child_subreaper
from .states import read_states
from .straggler_watch import StragglerWatch
from .watcher import Watcher

# A job across machines that failed: how long the other machines may still report their ranks' end through the
# job's store (their ranks fail within moments of a peer's failure).
LAST_WORDS_S = 2.0


@dataclass(frozen=True)
class StragglerPlan:
    """Whether a job's stragglers are watched, how often its ranks read their recorders at most, where lines go."""

    enabled: bool = True
    every_s: float = arrivals.DEFAULT_EVERY_S
    say: Callable[[str], None] | None = None
    why_off: str = "switched off"


@dataclass
class JobSpec:
    """What one job runs and how: the differences between a lab stage, a drill and the user's own script."""

    run: RunDir
    nproc: int  # ranks this machine starts
    entrypoint: Any  # a function (the lab's worker.rank_main) or the interpreter that runs job/boot.py
    args: tuple  # what the entrypoint gets: (RankJob,) or the boot module's command line
    meeting: Callable[[], ContextManager[Meeting]]  # where it listens: cluster/exposure.meet
    make_config: Callable[[Meeting], Any]  # torch's LaunchConfig for that meeting
    env: dict[str, str] = field(default_factory=dict)  # what every rank inherits, besides the run's markers
    hang_timeout_s: float | None = None
    job_id: str = ""  # the rendezvous' run id: the status keys of this launch in the job's store
    expected: list[int] | None = None  # the global ranks this machine starts, where known beforehand
    description: dict | None = None  # job.json, for people to read
    sampler: Any = None  # a context manager sampling the ranks (sampler.RankSampler), or None
    controller: Callable[[RunDir], None] | None = None  # runs in a thread while the ranks run (drills inject)
    ras: Any = None  # job/ras.py RasPlan, or None
    exposure: Any = None  # exposure.Exposure: where the job will listen, for the report if it never meets
    guardian: bool = True  # start the job's guardian (False: the caller holds one for this run already)
    stragglers: StragglerPlan | None = None  # None: not watched, and nothing said of it (a lab stage's timing)


@dataclass
class JobOutcome:
    run: RunDir
    started_at: float
    ended_at: float
    ok: bool = False
    duration_s: float = 0.0
    return_values: dict[int, Any] = field(default_factory=dict)
    failures: dict[int, elastic.ElasticFailure] = field(default_factory=dict)
    torchrun_root_cause_rank: int | None = None
    launcher_error: str | None = None
    interrupted: bool = False
    listen: Listened | None = None
    hang: Hang | None = None
    culprit: Culprit | None = None
    ends: dict[int, RankEnd] = field(default_factory=dict)
    evidence: dict[int, RankEvidence] = field(default_factory=dict)
    states: dict[int, RankState] = field(default_factory=dict)  # each rank's last status (the job's, across)
    job_states: dict[int, RankState] = field(default_factory=dict)  # across machines: the store's view
    ended_after: list[LeftProcess] = field(default_factory=list)  # the job's processes ddplab ended afterwards
    left_running: list[LeftProcess] = field(default_factory=list)  # and those that outlived even that
    first_failure_seen_at: float | None = None
    machines_lost: MachineLoss | None = None
    stragglers: StragglerReport | None = None

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def run_dir(self) -> str:
        return str(self.run.path)

    @property
    def detected_at(self) -> float | None:
        """When ddplab knew the job had gone wrong: the hang declaration, a rank's failure, or elastic's return."""
        if self.ok:
            return None
        if self.hang:
            return self.hang.declared_at
        return min(t for t in (self.first_failure_seen_at, self.ended_at) if t is not None)


def run_job(spec: JobSpec) -> JobOutcome:
    """The job from start to end; nothing it started is left running (what could not be ended: ``left_running``)."""
    run = spec.run
    started = time.time()
    outcome = JobOutcome(run, started, started, listen=spec.exposure.record() if spec.exposure else None)
    watcher = Watcher(run, spec.nproc, spec.hang_timeout_s, job=spec.job_id, ras=spec.ras)
    plan = spec.stragglers
    stragglers = StragglerWatch(run, started, say=plan.say, job=spec.job_id, enabled=plan.enabled,
                                off_reason=plan.why_off) if plan else None
    reaper = set_child_subreaper(True)
    try:
        with spec.meeting() as meeting, (Guardian(run) if spec.guardian else contextlib.nullcontext()):
            outcome.listen = meeting.exposure.record()
            _write_quietly(run.listen_file, json.dumps(meeting.exposure.to_dict(), indent=2))
            if spec.description is not None:
                _write_quietly(run.job_file, json.dumps(spec.description, indent=2, default=str))
            env = {**spec.env, **meeting.exposure.environment(),
                   **run.marker_env(os.getpid(), start_ticks(os.getpid()))}
            if plan and plan.enabled:  # the launcher's own setting first (the cost benchmark reads every second)
                env[arrivals.ARRIVALS_ENV] = os.environ.get(arrivals.ARRIVALS_ENV) or f"{plan.every_s:g}"
            with (spec.sampler or contextlib.nullcontext()), watcher, (stragglers or contextlib.nullcontext()):
                if spec.controller is not None:
                    threading.Thread(target=spec.controller, args=(run,), name="ddplab-controller",
                                     daemon=True).start()
                result = elastic.run(spec.make_config(meeting), spec.entrypoint, spec.args, run, env)
                outcome.ended_at = time.time()
                if not result.ok and meeting.across_machines:
                    _wait_for_last_words()
            _take(outcome, result)
            outcome.ended_after, outcome.left_running = watcher.leftovers()
    except CannotListen as exc:  # nothing started, nothing listened: a report that says so
        outcome.launcher_error, outcome.listen, outcome.ended_at = str(exc), None, time.time()
    except StoreWaitStopped as exc:
        outcome.launcher_error, outcome.interrupted, outcome.ended_at = f"interrupted: {exc}", True, time.time()
    finally:
        if reaper:
            watcher.family.reap_adopted()
            set_child_subreaper(False)
    _judge(outcome, watcher, spec)
    outcome.stragglers = stragglers.report() if stragglers else None
    return outcome


def _wait_for_last_words(wait_s: float = LAST_WORDS_S) -> None:
    """A job across machines failed here: give the other machines' ranks a moment to report their end through the
    store, so that a machine that failed is told from one that vanished. A stop request cuts it short."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and not interrupts.requested():
        time.sleep(0.1)


def _take(outcome: JobOutcome, result: elastic.ElasticOutcome) -> None:
    for f in fields(result):  # every field of elastic's outcome is one of the job's, by the same name
        setattr(outcome, f.name, getattr(result, f.name))
    # a script's ranks return nothing (None) through elastic: only a function's values are kept
    outcome.return_values = {r: v for r, v in result.return_values.items() if v is not None}


def _judge(outcome: JobOutcome, watcher: Watcher, spec: JobSpec) -> None:
    """How each rank ended, the evidence, and the culprit where the job did not succeed."""
    outcome.hang = watcher.hang
    outcome.first_failure_seen_at = watcher.first_failure_seen_at
    outcome.interrupted = outcome.interrupted or watcher.stopped_at is not None
    # The stop signal's own time: elastic ends the ranks for it (SIGTERM) before the watcher's next poll sees it.
    stop_at = (interrupts.requested_at() or watcher.stopped_at) if outcome.interrupted else None
    outcome.job_states = dict(watcher.job_states)
    outcome.states = {**watcher.job_states, **read_states(outcome.run), **_said_before_teardown(watcher)}
    outcome.ends = rank_ends(watcher, outcome.run, outcome.failures, outcome.states, succeeded=outcome.ok,
                             stop_at=stop_at)
    if not outcome.ok:
        outcome.machines_lost = watcher.machines_lost()
    if outcome.ok or (outcome.launcher_error and not outcome.interrupted and not outcome.states):
        outcome.evidence = gather(outcome.run, spec.expected or [], outcome.states, outcome.ends,
                                  requested(outcome.run))
        return
    interrupted_at = (stop_at or outcome.ended_at) if outcome.interrupted else None
    outcome.evidence, outcome.culprit = judge_job(outcome.run, watcher, spec.nproc, outcome.states, outcome.ends,
                                                  spec.expected, interrupted_at)


def _said_before_teardown(watcher: Watcher) -> dict[int, RankState]:
    """For a declared hang, the last statuses before the teardown began, where the ranks wrote later ones: a SIGTERM
    handler may still run code (Lightning's calls a broadcast) and make a stuck rank look arrived."""
    hang = watcher.hang
    if hang is None or hang.ended_at is None:
        return {}
    now = read_states(watcher.run)
    return {r: s for r, s in watcher.before_teardown.items() if r not in now or now[r].heartbeat > hang.ended_at}


def judge_job(run: RunDir, watcher: Watcher, nproc: int, states: dict[int, RankState], ends: dict[int, RankEnd],
              expected: list[int] | None = None, interrupted_at: float | None = None):
    """(evidence, culprit) of a job that did not succeed, from what its watcher saw and its ranks left."""
    if expected is None and watcher.job_states:
        sizes = [s.world_size for s in watcher.job_states.values() if s.world_size]
        expected = list(range(max(sizes))) if sizes else None
    in_time = set(watcher.hang.answered) if watcher.hang else None
    until = watcher.hang.ended_at if watcher.hang else None
    evidence = gather(run, expected or [], states, ends, requested(run), in_time, until)
    hosts = {r: s.machine for r, s in states.items()} if watcher.job_states else None
    local = set(read_states(run)) | set(ends)
    culprit = judge.name_culprit(evidence, expected, hang=watcher.hang, interrupted_at=interrupted_at,
                                 local_count=nproc, hosts=hosts, local_ranks=local)
    return evidence, culprit


def rank_ends(watcher: Watcher, run: RunDir, failures: dict[int, elastic.ElasticFailure],
              states: dict[int, RankState] | None = None, succeeded: bool = False,
              stop_at: float | None = None) -> dict[int, RankEnd]:
    """How each of this machine's ranks ended (the exit as seen, else elastic's report), and whether the launcher
    ended it: this watcher signalled it, elastic's teardown (_teardown), or a signal after the stop at ``stop_at``.
    ``succeeded``: status 0 for a rank whose exit was seen without one (elastic reaped it first)."""
    seen = watcher.exits.ends()
    ends = {}
    for rank in sorted(set(seen) | set(failures)):
        e, f = seen.get(rank), failures.get(rank)
        if e is not None and (e.exit_code is not None or e.signal is not None):
            pid, at, code, sig = e.pid, e.at, e.exit_code, e.signal
        elif f is not None:  # the exit was not seen as it happened: elastic's time is its poll's, in whole seconds
            pid, at, code, sig = f.pid, (e.at if e else None), (None if f.signal else f.exitcode), f.signal
        else:
            pid, at, code, sig = e.pid, e.at, (0 if succeeded else None), None
        ends[rank] = (pid, at, code, sig)
    out = {}
    for rank, (pid, at, code, sig) in ends.items():
        others = {r: e for r, e in ends.items() if r != rank}
        by_launcher = pid in watcher.signalled or _after_the_stop(sig, at, stop_at) \
            or _teardown(sig, at, others, states or {})
        oom = watcher.exits.oom_evidence(pid) if sig == "SIGKILL" and not by_launcher else None
        out[rank] = RankEnd(rank=rank, pid=pid, at=at, exit_code=code, signal=sig, by_launcher=by_launcher,
                            oom_killed=oom)
    return out


# A death's time is read by a thread of the launcher once it gets the GIL back: on a loaded machine deaths close
# together can be read in the wrong order.
READ_SLACK_S = 0.5
# elastic (and the watcher) send SIGKILL only after SIGTERM's grace (2 s here, 30 s elastic's default)
SIGKILL_AFTER_SIGTERM_S = 1.0


def _teardown(sig: str | None, at: float | None, others: dict, states: dict[int, RankState]) -> bool:
    """Whether a rank that ended by ``sig`` was ended by elastic's teardown, which signals only once a rank failed.
    SIGTERM: after another rank's failure, or up to READ_SLACK_S before one that is not a victim's (a victim fails
    after its cause, never before). SIGKILL: after a failure, or SIGKILL_AFTER_SIGTERM_S after another's SIGTERM.
    A time not seen is the teardown's once another rank failed."""
    if sig not in ("SIGTERM", "SIGKILL"):
        return False
    causes = {r: e_at for r, (_, e_at, code, e_sig) in others.items() if e_at is not None
              and (e_sig not in (None, "SIGTERM") or (e_sig is None and code not in (0, None)))}
    terms = [e_at for _, e_at, _, e_sig in others.values() if e_at is not None and e_sig == "SIGTERM"]
    if at is None:
        return bool(causes or terms)
    if any(c < at for c in causes.values()):
        return True
    if sig == "SIGTERM":
        return any(c <= at + READ_SLACK_S for r, c in causes.items() if not _lost_its_peer(states.get(r)))
    return any(t <= at - SIGKILL_AFTER_SIGTERM_S for t in terms)


def _after_the_stop(sig: str | None, at: float | None, stop_at: float | None) -> bool:
    """Ended by SIGTERM or SIGKILL once the launcher had its stop signal (Ctrl+C, SIGTERM): elastic's teardown.
    Read with READ_SLACK_S, as a death's time is read late; a time not seen is the teardown's too."""
    return stop_at is not None and sig in ("SIGTERM", "SIGKILL") and (at is None or at >= stop_at - READ_SLACK_S)


def _lost_its_peer(state: RankState | None) -> bool:
    """The rank's own error says it lost a peer or gave up waiting: a victim of another's failure, not a cause."""
    return state is not None and judge.gave_up_or_lost_peer(state.error)


def _write_quietly(path, text: str) -> None:
    with contextlib.suppress(Exception):  # noqa: BLE001 - a file for people to read; the job does not depend on it
        write_text_atomic(path, text)


class Guardian:
    """The guardian process for one job (guardian.py): told "done" when the launcher ended everything itself."""

    def __init__(self, run: RunDir):
        self.run = run
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "Guardian":
        env = {k: v for k, v in os.environ.items() if k not in MARKER_ENVS}  # never mistaken for the job's
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", guardian.MODULE, str(self.run.path),
                                          self.run.run_id], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, env=env, close_fds=True,
                                         start_new_session=True)  # a terminal's Ctrl+C is the launcher's
        except OSError:
            self.proc = None  # no guardian: a SIGKILLed launcher may leave the ranks' own children
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(OSError):
            self.proc.stdin.write(b"done")
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

