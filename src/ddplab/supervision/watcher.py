"""The launcher's side of supervision, for every job: watch every rank, declare a hang, collect the evidence, end
the job's processes.

A hang is declared when some rank waits (in init or a collective, said or seen, or with a collective pending) and
nothing progressed for the hang timeout (states). Ranks that all compute are not hung: nobody waits. A rank that
finished does not stop the clock (it may have skipped a collective); one that failed does, since elastic then
tears the group down.

On a hang: ask every rank for its flight record and stacks, read the silent ones' from outside (py-spy, then
faulthandler's signal), ask RAS (--ras), then end every process of the job, and only those proven the job's (a
rank's pid with its start time, its family). A stop request (Ctrl+C, SIGTERM) ends them the same way.

Across machines every watcher judges the whole job from the store and ends only its own ranks; a failure on
another machine that elastic here does not act on starts the hang clock on this machine's ranks.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import traceback
import uuid

from ..basics import interrupts, proc_stat
from ..basics.files import write_text_atomic
from .reaping import signal_quietly
from ..records.supervision import Hang, LeftProcess, MachineLoss, RankState
from ..basics.rundir import RunDir
from . import outside_stacks, states as rules
from .beacon import HEARTBEAT_S
from .exits import ExitWatch
from .family import Family
from . import sources
from .sources import JOB_STORE, Files, JobStore

POLL_S = 0.25
# While every poll sees progress, the next full read comes this much later (a stop request or a rank's end is still
# seen at the next POLL_S): a poll's CPU is taken from the ranks on a busy host, and a hang is declared at most
# PROGRESSING_POLL_S - POLL_S later.
PROGRESSING_POLL_S = 0.5
# How long a machine that declared a hang waits for the others to follow before it ends its ranks: several of their
# polls with a store read each, under load; a machine that never answers (gone, cut off) costs this once.
FOLLOW_WAIT_S = 3.0
DUMP_WAIT_S = 3.0  # for ranks to answer a dump request
STACK_SIGNAL_WAIT_S = 0.5  # for faulthandler to write
GRACE_S = 2.0  # between SIGTERM and SIGKILL when the watcher ends the job's processes
START_GRACE_S = 120.0  # for ranks that never write a status at all: far above torch's import time
STALE_S = max(2.0, 4 * HEARTBEAT_S)  # a rank not heard for this long is frozen, not slow
ACTIVE_SHARE = 0.1  # of a core over the quiet window: a frozen rank that used this much computes
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
STOPPED = ("T", "t")  # /proc state letters: SIGSTOP, a debugger


def request_dumps(run: RunDir, reason: str, by: str) -> str:
    """Ask every rank of this job for its flight record and stacks; returns the request id."""
    request_id = uuid.uuid4().hex[:8]
    write_text_atomic(run.dump_request_file, json.dumps({"id": request_id, "reason": reason, "by": by,
                                                         "at": time.time()}), durable=False)
    return request_id


class Watcher:
    def __init__(self, run: RunDir, local_count: int, hang_timeout_s: float | None, *, job: str = "",
                 ras=None, grace_s: float = GRACE_S, open_reader=None):
        self.run = run
        self.local_count = local_count
        self.hang_timeout_s = hang_timeout_s
        self.grace_s = grace_s
        self.job = job  # the rendezvous' run id: the status keys of this launch in the job's store
        self.ras = ras  # job/ras.py RasPlan, or None: nothing connects
        self._open_reader = open_reader or sources.open_reader
        self.exits = ExitWatch()
        self.family = Family(run)
        self.hang: Hang | None = None  # set once, when a hang is declared
        self.job_states: dict[int, RankState] = {}  # the whole job as last read from its store (several machines)
        self.before_teardown: dict[int, RankState] = {}  # this machine's statuses as a declared hang's teardown began
        self._cpu: dict[int, int] = {}  # rank -> its CPU ticks when the quiet window started
        self.first_failure_seen_at: float | None = None
        self.stopped_at: float | None = None  # a stop request (Ctrl+C, SIGTERM) seen, and the job ended for it
        self.signalled: set[int] = set()  # pids this watcher ended, or sent faulthandler's stack signal
        self._job_source: JobStore | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ddplab-watcher", daemon=True)

    def __enter__(self) -> "Watcher":
        self.exits.follow(self.run, self.local_count, self._stop)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        ras_s = self.ras.budget_s if self.ras else 0.0
        self._thread.join(timeout=DUMP_WAIT_S + outside_stacks.TIMEOUT_S + STACK_SIGNAL_WAIT_S + ras_s
                          + 2 * self.grace_s + STALE_S + FOLLOW_WAIT_S + sources.STORE_TIMEOUT_S + 5)
        self._observe_ranks()  # the last ranks to start, if any started after the last poll

    # ---------------------------------------------------------------------------------------- after the job

    def leftovers(self) -> tuple[list[LeftProcess], list[LeftProcess]]:
        """After the job: end every process it started that still runs; (ended, survived), named by program only."""
        self.family.marked()
        left = self.family.alive()
        if not left:
            return [], []
        _, _, survived = self._end(left)
        return ([LeftProcess(m.pid, m.program, ended=True) for m in left if m.pid not in survived],
                [LeftProcess(m.pid, m.program) for m in left if m.pid in survived])

    def machines_lost(self) -> MachineLoss | None:
        """Other machines that went silent while the job failed (states.silent_machines); None on one machine."""
        source = self._job_source
        if source is None or not self.job_states:
            return None
        local = rules.read_states(self.run)
        job = {**self.job_states, **local}  # this machine's last words are in its files
        store_lost = source.address if source.lost else None
        mine = {s.machine for s in local.values()}
        if self.hang and self.hang.followed:
            mine.add(self.hang.followed)  # it declared the hang and ended its ranks: alive, not lost
        lost = {m: ranks for m, ranks in rules.silent_machines(job, store_lost).items() if m not in mine}
        if not lost:
            return None
        failures = any(s.phase == "failed" for s in job.values())
        reason = ("no rank there reported an end while the job's ranks elsewhere failed" if failures else
                  "the job's store stopped answering and its machine's ranks said nothing more")
        heard = {m: max(job[r].heartbeat for r in ranks) for m, ranks in lost.items()}
        return MachineLoss(lost, reason, heard)

    # ---------------------------------------------------------------------------------------- the loop

    def _loop(self) -> None:
        """Watch until stopped; a bug of ddplab's in one poll is written to watcher-error.txt and the watch starts
        over, so it cannot end supervision for the rest of the job."""
        while not self._stop.is_set():
            try:
                self._watch()
                return
            except Exception:  # noqa: BLE001 - said in the run directory; the job's fate is not ddplab's to change
                with contextlib.suppress(OSError):
                    with open(self.run.path / "watcher-error.txt", "a") as f:
                        f.write(f"{time.time():.3f}\n{traceback.format_exc()}\n")
                self._stop.wait(POLL_S)

    def _watch(self) -> None:
        source = self._wait_for_source()
        if source is None:
            return
        started, last_key, last_change, silent_since = time.time(), None, None, None
        relaxed_until = 0.0  # while the job progresses, polls before this (monotonic) read nothing
        while not self._stop.wait(POLL_S):
            if time.monotonic() < relaxed_until and not (interrupts.requested() or self._ended_here()):
                continue
            self._observe_ranks()
            if interrupts.requested() and self.stopped_at is None:
                self._stop_everything()
                continue
            states = self._read(source)
            now = time.time()
            self._note_failures(states, now)
            if not self.hang_timeout_s or self.stopped_at is not None:
                continue  # watched for exits, the family and machines_lost only
            elsewhere = source.announced() if source.judged_from == JOB_STORE else None
            if elsewhere and elsewhere["machine"] not in (mine := self._machines()):
                # Another machine declared the hang and waits for this word before its teardown: follow it, so
                # that neither side's ranks ending look like a failure or a machine lost.
                for machine in mine:
                    source.acknowledge(machine)
                self._declare(source, states, now, last_change or started, following=elsewhere)
                return
            if source.judged_from == JOB_STORE and not states:
                # A read that failed (a store slow under load) is no news, not every rank missing: the store is
                # taken for lost only once it stayed silent for a hang timeout.
                silent_since = silent_since or now
                if now - silent_since < self.hang_timeout_s:
                    continue
            else:
                silent_since = None
            if any(s.phase == "failed" for s in states.values()) or self._ended_here():
                # On one machine every rank is this machine's: elastic ends the group when one of them fails.
                mine = rules.read_states(self.run) if source.judged_from == JOB_STORE else {}
                failed = rules.failed_elsewhere(states, mine)
                if not failed:
                    last_key, last_change = None, None  # this machine's ranks are ending: elastic handles it
                    continue
                key = ("after a failure elsewhere", rules.progress_key(mine))
                if key != last_key or last_change is None:
                    last_key, last_change = key, now
                elif now - last_change >= self.hang_timeout_s:
                    self._declare(source, states, now, last_change, failed)
                    return
                continue
            expected = source.expected(states)
            if expected is None or any(r not in states for r in expected):
                if now - started >= START_GRACE_S + self.hang_timeout_s:
                    self._declare(source, states, now, started)
                    return
                continue
            key = rules.progress_key(states)
            if key != last_key or last_change is None:
                last_key, last_change = key, now
                self._cpu_at_window_start()
                relaxed_until = time.monotonic() + PROGRESSING_POLL_S - POLL_S / 2
                continue
            if now - last_change < self.hang_timeout_s:
                continue
            active = self._active(states, now - last_change)
            if rules.is_hung(states, now - last_change, self.hang_timeout_s, now, STALE_S, active=active,
                             hold_for_imports=now - started < START_GRACE_S + self.hang_timeout_s):
                self._declare(source, states, now, last_change)
                return

    def _cpu_at_window_start(self) -> None:
        """Each of this machine's ranks' CPU time when the quiet window starts (proc_stat.activity)."""
        self._cpu = {r: seen[1] for r, pid in self.run.rank_pids().items() if (seen := proc_stat.activity(pid))}

    def _active(self, states: dict[int, RankState], window_s: float) -> set[int]:
        """The ranks whose process computes: running or in I/O now, or CPU over the quiet window at least
        ACTIVE_SHARE of it (a rank stuck holding the GIL on a lock still uses about 1 % of a core for its other
        threads' wake-ups). Another machine's ranks are taken as active: nothing here can tell."""
        pids = self.run.rank_pids()
        active = {r for r in states if r not in pids or r not in self._cpu}
        for rank in set(states) & set(pids) & set(self._cpu):
            seen = proc_stat.activity(pids[rank])
            if seen is None:
                continue
            letter, ticks = seen
            if letter in ("R", "D") or (ticks - self._cpu[rank]) / CLOCK_TICKS >= ACTIVE_SHARE * window_s:
                active.add(rank)
        return active

    def _observe_ranks(self) -> None:
        pids = self.run.rank_pids()
        for rank, pid in pids.items():
            self.exits.watch(rank, pid)
        with contextlib.suppress(Exception):  # noqa: BLE001 - a process gone while walked: the next poll sees the rest
            self.family.refresh(pids)

    def _machines(self) -> set[str]:
        """This machine as its ranks name it (supervision/beacon.py: their address toward the job's endpoint)."""
        return {s.machine for s in rules.read_states(self.run).values() if s.machine}

    def _ended_here(self) -> bool:
        """A rank of this machine ended other than by finishing (elastic tears the group down)."""
        return any(not e.at is None and (e.exit_code != 0 or e.signal) for e in self.exits.ends().values())

    def _note_failures(self, states: dict[int, RankState], now: float) -> None:
        if self.first_failure_seen_at is None and (any(s.phase == "failed" for s in states.values())
                                                   or self._ended_here()):
            self.first_failure_seen_at = now

    def _wait_for_source(self):
        """The status to watch, once the launcher is about to start ranks; None if stopped before."""
        while not self._stop.wait(POLL_S):
            self._observe_ranks()
            if interrupts.requested() and self.stopped_at is None:
                self._stop_everything()
            source = self._source()
            if source is not None:
                self._job_source = source if source.judged_from == JOB_STORE else None
                return source
        return None

    def _read(self, source) -> dict[int, RankState]:
        states = source.read()
        if source.judged_from == JOB_STORE:
            self.job_states = {**self.job_states, **states}
        return states

    def _source(self):
        """The store named in listen.json (several machines), this machine's files, or None before ranks start."""
        listen = sources.listened(self.run)
        if listen is None:  # the ranks have not been started, unless their status files say otherwise
            return Files(self.run, self.local_count) if self.run.status_files() else None
        store = sources.store_of(listen)
        reader = self._open_reader(*store, self.job) if store else None
        return JobStore(reader, store[0]) if reader is not None else Files(self.run, self.local_count)

    # ---------------------------------------------------------------------------------------- ending processes

    def _stop_everything(self) -> None:
        """A stop request: end every process of the job now, ranks that ignore SIGTERM too."""
        self.stopped_at = time.time()
        self._end(self.family.alive())

    def _end(self, members) -> tuple[list[int], list[int], list[int]]:
        """family.end, each member noted as signalled by this watcher first: (terminated, killed, survived)."""
        with self._lock:
            self.signalled |= {m.pid for m in members}
        return self.family.end(members, self.grace_s)

    def _settled(self, source, states: dict[int, RankState], now: float) -> tuple[dict[int, RankState], float]:
        """The store read again one staleness window later, before a hang across machines is judged: a remote beat
        is dated when this reader polls, so a machine that stopped just before the declaration can look heard less
        than a window ago; one window later every rank that had stopped looks stopped, while a live one beats."""
        time.sleep(STALE_S + POLL_S)
        fresh = self._read(source)
        if not fresh:  # the store stopped answering: nothing newer, judge the declaration's snapshot
            return states, now
        return {**states, **fresh}, time.time()

    def _declare(self, source, states: dict[int, RankState], now: float, last_change: float,
                 failed_elsewhere: list[int] | None = None, following: dict | None = None) -> None:
        if source.judged_from == JOB_STORE and not states:  # nothing in the store: judge what this machine has
            source, states = Files(self.run, self.local_count), rules.read_states(self.run)
        if source.judged_from == JOB_STORE and not following and not failed_elsewhere:
            states, now = self._settled(source, states, now)
        local = rules.read_states(self.run)  # this machine's ranks: the only processes this launcher may signal
        if following:
            why = f"{following['machine']} declared a hang ({following.get('reason')}); this machine's ranks with it"
        elif failed_elsewhere:
            states = {**states, **local}
            why = (f"{_failed_in_words(failed_elsewhere, states)} failed on another machine and this machine's "
                   f"ranks made no progress since")
        elif any(r not in states for r in (source.expected(states) or ())):
            why = f"a rank wrote no status within {START_GRACE_S + (self.hang_timeout_s or 0):.0f} s"
        else:
            why = f"no progress for {now - last_change:.1f} s while a rank waited"
        running = {r: s for r, s in local.items() if s.phase not in rules.END_PHASES and _is_ours(s)}
        if source.judged_from == JOB_STORE and not following:
            self._announce(source, states, why)
        request_id = None
        with contextlib.suppress(Exception):  # noqa: BLE001 - no room for the request: stacks from outside only
            request_id = request_dumps(self.run, f"hang: {why}", by="launcher")
        answered = self._wait_for_answers(request_id, running) if request_id else set()
        py_spy_stacks, py_spy, signalled = self._stacks_of_the_silent(
            {r: s for r, s in running.items() if r not in answered})
        ras = self.ras.ask() if self.ras else None  # bounded (job/ras.py); the ranks are still there to answer
        rank_pids = {s.pid: r for r, s in running.items()}
        for pid in rank_pids:  # by their own status files, with their start times: the job's ranks
            self.family.take(pid)
        ended_at = time.time()
        self.before_teardown = rules.read_states(self.run)
        terminated, killed, _ = self._end(self.family.alive())
        stacks = {r: str(self.run.stack_file(r)) for r in local if self.run.stack_file(r).exists()}
        self.hang = Hang(declared_at=now, last_progress_at=last_change, no_progress_s=round(now - last_change, 2),
                         hang_timeout_s=float(self.hang_timeout_s or 0), reason=why,
                         waiting_ranks=sorted(r for r, s in states.items() if rules.is_waiting(s)),
                         snapshot=dict(states), dump_request=request_id, answered=sorted(answered),
                         signalled_for_stacks=signalled, stacks=stacks, py_spy_stacks=py_spy_stacks, py_spy=py_spy,
                         terminated=sorted(rank_pids[p] for p in terminated if p in rank_pids),
                         killed=sorted(rank_pids[p] for p in killed if p in rank_pids), ras=ras,
                         judged_from=source.judged_from if source.judged_from == JOB_STORE else None,
                         followed=following["machine"] if following else None, ended_at=ended_at)

    def _announce(self, source, states: dict[int, RankState], why: str) -> None:
        """Tell the other machines of the hang and wait until their watchers read it (at most FOLLOW_WAIT_S): else
        they take their ranks' "connection closed by peer" on the teardown for a failure of their own."""
        mine = self._machines()
        if not mine:
            return
        source.announce(min(mine), why)
        for machine in mine:
            source.acknowledge(machine)
        source.wait_acknowledged({s.machine for s in states.values() if s.machine} - mine, FOLLOW_WAIT_S)

    def _stacks_of_the_silent(self, silent: dict[int, RankState]) -> tuple[dict[int, str], str | None, list[int]]:
        """The stacks of the ranks that did not answer: (rank -> py-spy's file, how py-spy went, the ranks signalled).
        py-spy asks nothing of the rank; faulthandler's signal goes only where py-spy could not read and it would
        answer, since it ends a blocking system call early and the rank runs on from where it was stuck."""
        if not silent:
            return {}, None, []
        targets = [outside_stacks.SilentRank(r, s.pid, proc_stat.state(s.pid) in STOPPED)
                   for r, s in silent.items() if _is_ours(s)]
        dumps, missing = outside_stacks.take(targets, self.run.py_spy_file)
        signalled = sorted(r for r, s in silent.items()
                           if not (r in dumps and dumps[r].taken) and _stack_signal_reaches(s))
        for rank in signalled:  # faulthandler writes from its handler, whoever holds the GIL
            with self._lock:
                self.signalled.add(silent[rank].pid)  # should the signal end it after all, it was ddplab's doing
            signal_quietly(silent[rank].pid, silent[rank].stack_signal)
        if signalled:
            time.sleep(STACK_SIGNAL_WAIT_S)
        files = {r: d.file for r, d in dumps.items() if d.file}
        return files, missing or outside_stacks.in_words(dumps) or None, signalled

    def _wait_for_answers(self, request_id: str, running: dict[int, RankState]) -> set[int]:
        from .evidence import answered as answer_of

        deadline = time.monotonic() + DUMP_WAIT_S
        answered: set[int] = set()
        while time.monotonic() < deadline:
            answered = {r for r in running if answer_of(self.run, r) == request_id}
            if len(answered) == len(running):
                break
            time.sleep(0.05)
        return answered


def _is_ours(state: RankState) -> bool:
    """The pid in a status file is still that rank: the same start time its beacon recorded."""
    return state.proc_start_ticks is None or proc_stat.start_ticks(state.pid) == state.proc_start_ticks


def _stack_signal_reaches(state: RankState) -> bool:
    """faulthandler in the rank would write its stacks on the stack signal: the pid is still that rank, it is not
    stopped (resumed, it would no longer be where it stopped), and it catches the signal (a rank that exec'd away
    lost the handler, and the signal's default action would end it)."""
    return (state.stack_signal is not None and _is_ours(state) and proc_stat.state(state.pid) not in STOPPED
            and proc_stat.catches(state.pid, state.stack_signal) is True)


def _failed_in_words(ranks: list[int], states: dict[int, RankState]) -> str:
    """rank 0 (on 10.9.0.1), rank 4 (on 10.9.0.2): ranks of other machines, with their machines."""
    return ", ".join(f"rank {r}" + (f" (on {states[r].machine})" if r in states and states[r].machine else "")
                     for r in ranks)
