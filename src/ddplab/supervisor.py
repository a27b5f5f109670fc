"""ddplab's own hang detection, in the launcher.

Watches the status of the job's ranks (status.py). When no rank makes progress for ``hang_timeout_s``,
it declares a hang, names the culprits by GLOBAL rank by comparing phases and collective sequence
numbers (status.name_culprits), asks its own ranks for their Python stacks (SIGUSR1 -> faulthandler,
into RunDir.stack_file), then tears its own ranks down: SIGTERM, and SIGKILL after a grace period.
Elastic then sees the ranks die and returns.

Where the status comes from: on one machine, this machine's status files. In a job across machines
(the launcher wrote a store address to listen.json, and the ranks publish there), the job's store:
every machine's supervisor then judges the whole job (its world size from the store, not the local
count) and names the culprits with their machines, wherever they run. It still signals only the
ranks of its own machine, found through their status files: a pid from the store is a pid on some
other machine.

When a rank ends, elastic handles it: this machine's agent tears its group down when one of its own ranks
ends, or when the job's store stops answering. One end it does not act on: a rank of ANOTHER machine that
failed while the store still answers, as where this machine hosts it (status.failed_elsewhere). That job
cannot complete (launch.py starts it with no restarts: the failed rank's group is gone for good), so the
ranks here wait for nothing. The hang clock then runs on this machine's own ranks, from the moment the
failure is seen; if they make no progress for ``hang_timeout_s``, the supervisor declares it as a hang
(culprits judged from the failed ranks' last words and the running ones' state,
status.name_culprits_after_failure) and tears its own ranks down, as for any hang. Not at once: a peer's
failure usually ends the ranks here within moments by themselves (their sockets to it close), leaving
their own error as the evidence a report and a drill's judge read; the hang timeout bounds the wait
when it does not. Without a hang timeout nothing is judged, on this path as on any other.

The hang clock starts once every rank has written its first status: a rank still importing torch
on a busy machine is slow, not hung (elastic notices a rank that dies while starting). A rank that
never writes one is named "never started" only after ``START_GRACE_S`` more, counted from the moment
the launcher is about to start ranks (listen.json written: a machine may wait for the store first).
"""

from __future__ import annotations

import json
import signal
import threading
import time
from dataclasses import replace

from . import status
from .procs import alive, signal_quietly
from .records.session import HangRecord, MachineLoss, RankState
from .rundir import RunDir

POLL_S = 0.25
STACK_WAIT_S = 1.0
START_GRACE_S = 120.0  # for ranks that never write a status at all: far above torch's import time
STALE_S = max(2.0, 4 * status.HEARTBEAT_S)  # a rank not heard for this long is frozen, not slow
STORE_TIMEOUT_S = 3.0  # one read of the job's store: a store cut off must not hold the watch up for long
FILES = "this machine's status files"
JOB_STORE = "the job's store"


class _Files:
    """This machine's ranks, from their status files."""

    judged_from = FILES

    def __init__(self, run: RunDir, local_count: int):
        self.run, self.local_count = run, local_count

    def read(self) -> dict[int, RankState]:
        return status.read_all(self.run)

    def expected(self, states: dict[int, RankState]) -> list[int] | None:
        return status.expected_ranks(states, self.local_count)


class _JobStore:
    """Every rank of the job, from its store (cluster/status_store.py), heartbeats on this machine's clock."""

    judged_from = JOB_STORE

    def __init__(self, reader, address: str):
        self.reader = reader
        self.address = address  # the store's machine, as its ranks name it (they run where it listens)
        self.lost = False  # it answered, then stopped answering

    def read(self) -> dict[int, RankState]:
        try:
            states = self.reader.judging_records(self.reader.read())
        except Exception:  # noqa: BLE001 - the store's host ended (job over, machine gone): nothing new to judge
            self.lost = self.lost or self.reader.world_size is not None
            return {}
        self.lost = False
        return states

    def expected(self, states: dict[int, RankState]) -> list[int] | None:
        return list(range(self.reader.world_size)) if self.reader.world_size else None


class Supervisor:
    def __init__(self, run: RunDir, local_count: int, hang_timeout_s: float | None, grace_s: float = 3.0,
                 job: str = "", open_reader=None):
        self.run = run
        self.local_count = local_count
        self.hang_timeout_s = hang_timeout_s
        self.grace_s = grace_s
        self.job = job  # the rendezvous' run id: the status keys of this launch in the job's store
        self._open_reader = open_reader or _open_reader
        self.hang: HangRecord | None = None  # filled when a hang is declared
        self.job_states: dict[int, RankState] = {}  # the whole job as last read from its store (several machines)
        self._job_source: _JobStore | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ddplab-supervisor", daemon=True)

    def __enter__(self):
        # Without a hang timeout it only watches a job across machines (for machines_lost), never judges.
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.grace_s + 5)

    def machines_lost(self) -> MachineLoss | None:
        """Other machines that went silent while the job failed (status.silent_machines), judged from the last
        view of the job's store with this machine's own ranks as their status files say; None on one machine."""
        source = self._job_source
        if source is None or not self.job_states:
            return None
        local = status.read_all(self.run)
        job = {**self.job_states, **local}  # this machine's last words are in its files
        store_lost = source.address if source.lost else None
        mine = {s.machine for s in local.values()}
        lost = {m: ranks for m, ranks in status.silent_machines(job, store_lost).items() if m not in mine}
        if not lost:
            return None
        failures = any(s.phase == "failed" for s in job.values())
        reason = ("no rank there reported an end while the job's ranks elsewhere failed" if failures else
                  "the job's store stopped answering and its machine's ranks said nothing more")
        heard = {m: max(job[r].heartbeat for r in ranks) for m, ranks in lost.items()}
        return MachineLoss(lost, reason, heard)

    def _loop(self) -> None:
        source = self._wait_for_source()
        if source is None or (not self.hang_timeout_s and self._job_source is None):
            return  # stopped before any rank started, or one machine without a hang timeout: nothing to watch
        started, last_key, last_change, silent_since = time.time(), None, None, None
        while not self._stop.wait(POLL_S):
            states = self._read(source)
            if not self.hang_timeout_s:
                continue  # a job across machines without a hang timeout: watched for machines_lost only
            now = time.time()
            if source.judged_from == JOB_STORE and not states:
                # A read that failed (a store slow under load) is no news, not every rank missing: the store is
                # taken for lost only once it stayed silent for a hang timeout (found in review).
                silent_since = silent_since or now
                if now - silent_since < self.hang_timeout_s:
                    continue
            else:
                silent_since = None
            if any(s.phase in status.END_PHASES for s in states.values()):
                # On one machine every rank is this machine's: elastic ends the group when one of them ends.
                mine = status.read_all(self.run) if source.judged_from == JOB_STORE else {}
                failed = status.failed_elsewhere(states, mine)
                if not failed:
                    last_key, last_change = None, None  # this machine's ranks are ending: elastic handles it
                    continue
                # A rank of another machine failed and elastic here will not act (status.failed_elsewhere): the
                # hang clock runs on this machine's own ranks, restarted now that the failure is seen.
                key = ("after a failure elsewhere", status.progress_key(mine))
                if key != last_key or last_change is None:
                    last_key, last_change = key, now
                elif now - last_change >= self.hang_timeout_s:
                    self._declare(source, states, source.expected(states), now, now - last_change, failed)
                    return
                continue
            expected = source.expected(states)
            if expected is None or any(r not in states for r in expected):
                if now - started >= START_GRACE_S + self.hang_timeout_s:
                    self._declare(source, states, expected, now, now - started)
                    return
                continue
            key = status.progress_key(states)
            if key != last_key or last_change is None:
                last_key, last_change = key, now
                continue
            if now - last_change >= self.hang_timeout_s:
                self._declare(source, states, expected, now, now - last_change)
                return

    def _settled(self, source, states: dict[int, RankState], now: float) -> tuple[dict[int, RankState], float]:
        """The job's store read again one staleness window later, before frozen ranks are named. A remote beat is
        dated when this reader polls, not when the rank sent it (cluster/status_store.py), so of two ranks that
        stopped at one moment (their machine cut off) one can look heard a poll or more later, as seen in CI
        under load. Then every rank that had stopped by the declaration looks stopped, while a live one beats."""
        time.sleep(STALE_S + POLL_S)
        fresh = self._read(source)
        if not fresh:  # the store stopped answering: nothing newer, judge the declaration's snapshot
            return states, now
        return {**states, **fresh}, time.time()

    def _wait_for_source(self):
        """The status to watch, once the launcher is about to start ranks; None if stopped before."""
        while not self._stop.wait(POLL_S):
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
        """Where the job's status is: the store named in listen.json (several machines), this machine's files
        (one machine), or None while listen.json is not written."""
        try:
            listen = json.loads(self.run.listen_file.read_text())
        except (OSError, ValueError):
            # no listen.json: the ranks have not been started, unless their status files say otherwise
            return _Files(self.run, self.local_count) if self.run.status_files() else None
        across = listen.get("across_machines") if isinstance(listen, dict) else None
        if not across or not listen.get("address") or not isinstance(listen.get("port"), int):
            return _Files(self.run, self.local_count)
        reader = self._open_reader(listen["address"], listen["port"], self.job)
        return _JobStore(reader, listen["address"]) if reader is not None else _Files(self.run, self.local_count)

    def _declare(self, source, states: dict[int, RankState], expected: list[int] | None, now: float,
                 stalled_s: float, failed_elsewhere: list[int] | None = None) -> None:
        if source.judged_from == JOB_STORE and not states:  # nothing in the store: judge what this machine has
            source, states = _Files(self.run, self.local_count), status.read_all(self.run)
            expected = None
        if source.judged_from == JOB_STORE and status.frozen_ranks(states, now, STALE_S):
            states, now = self._settled(source, states, now)
        if failed_elsewhere:
            local = status.read_all(self.run)  # this machine's ranks: their files are the freshest
            states = {**states, **local}
            culprits, why = status.name_culprits_after_failure(states, self.local_count, now, stale_s=STALE_S,
                                                               expected=expected, mine=set(local),
                                                               failed=failed_elsewhere)
            why = (f"{_failed_in_words(failed_elsewhere, states)} failed on another machine and this machine's "
                   f"ranks made no progress since: {why}")
        else:
            culprits, why = status.name_culprits(states, self.local_count, now, stale_s=STALE_S, expected=expected)
        # Only this machine's ranks, by their own status files: the only processes this launcher may signal.
        pids = {r: s.pid for r, s in status.read_all(self.run).items()}
        for pid in pids.values():
            signal_quietly(pid, signal.SIGCONT)  # a paused rank cannot dump its stack
            signal_quietly(pid, signal.SIGUSR1)
        time.sleep(STACK_WAIT_S)
        stacks = {rank: str(self.run.stack_file(rank)) for rank in pids if self.run.stack_file(rank).exists()}
        across = source.judged_from == JOB_STORE
        self.hang = HangRecord(detected_at=now, no_progress_s=round(stalled_s, 2), culprit_ranks=culprits,
                               reason=why, snapshot=dict(states), stacks=stacks,
                               culprit_hosts={r: states[r].machine if r in states else None for r in culprits}
                               if across else None,
                               judged_from=source.judged_from if across else None)
        for pid in pids.values():
            signal_quietly(pid, signal.SIGTERM)
        deadline = time.time() + self.grace_s
        while time.time() < deadline and any(alive(p) for p in pids.values()):
            time.sleep(0.1)
        killed = [p for p in pids.values() if alive(p)]
        for pid in killed:
            signal_quietly(pid, signal.SIGKILL)
        self.hang = replace(self.hang, killed_after_grace=killed)


def _failed_in_words(ranks: list[int], states: dict[int, RankState]) -> str:
    """rank 0 (on 10.9.0.1), rank 4 (on 10.9.0.2): ranks of other machines, with their machines."""
    return ", ".join(f"rank {r}" + (f" (on {states[r].machine})" if r in states and states[r].machine else "")
                     for r in ranks)


def _open_reader(address: str, port: int, job: str):
    """A reader of the job's store (a client connection of the supervisor's own), or None when the store
    cannot be reached: the supervisor then judges this machine's files, as on one machine."""
    from .cluster.status_store import StatusReader, open_store

    try:
        return StatusReader(open_store(address, port, timeout_s=STORE_TIMEOUT_S), job=job)
    except Exception:  # noqa: BLE001 - any connection failure: the files still say something
        return None
