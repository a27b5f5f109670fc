"""Each rank's status through the job's own c10d store, readable by global rank from any machine.

A rank's status files live on its own machine, so a launcher sees only its own ranks. In a job across machines
every rank also publishes the same ``RankState`` under one key per global rank in the rendezvous store, which
every machine already reaches. The writer is the rank's beacon (``StatusPublisher``): phase changes are published
at once, collectives only at the next heartbeat, so the hot path stays local.

The reader (``JobStoreReader``) never compares remote clocks with its own: each record carries a beat counter,
and the reader notes on its own clock when a rank's beat last changed (``heard_at``); ``judging_records`` puts
that local time in the heartbeat, so one judge works for files and for the store.

Keys live under ``ddplab/status/<job>/attempt_<restart>/`` (``status_prefix``), ``<job>`` being the rendezvous
run id (new for every launch), so neither an earlier launch on the same endpoint nor an elastic restart is read
as this one: ``<global rank>``, ``world_size``, ``hang`` (the first hang a machine's watcher declared),
``arrivals/<global rank>`` and ``stragglers``.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Callable, Mapping

from ..records.codec import RecordError, from_json, to_json
from ..records.session import RankState

KEY_ROOT = "ddplab/status"
# A rank's connection (and each publish) to the job's store: bounded, so that a rank cut off from the store
# (a partition) is not held up long by its heartbeat, and still ends at its own timeout.
CONNECT_TIMEOUT_S = 10.0


def status_prefix(job: str = "", restart_count: int = 0) -> str:
    return f"{KEY_ROOT}/{job}/attempt_{restart_count}" if job else f"{KEY_ROOT}/attempt_{restart_count}"


# The keys under a prefix, spelled once for the ranks that write them and the launchers that read them.
def rank_key(prefix: str, rank: int) -> str:
    return f"{prefix}/{rank}"


def arrivals_key(prefix: str, rank: int) -> str:
    return f"{prefix}/arrivals/{rank}"


def world_size_key(prefix: str) -> str:
    return f"{prefix}/world_size"


def open_store(host: str, port: int, timeout_s: float = CONNECT_TIMEOUT_S):
    """A client connection of its own to the job's store (not the process group's)."""
    from torch.distributed import TCPStore

    return TCPStore(host, port, None, False, timedelta(seconds=timeout_s))


class StatusPublisher:
    """Writer side, inside a rank: one rank's RankState under its key in the job's store."""

    def __init__(self, store, rank: int, job: str = "", restart_count: int = 0):
        self._store = store
        prefix = status_prefix(job, restart_count)
        self._key = rank_key(prefix, rank)
        self._arrivals_key = arrivals_key(prefix, rank)
        # Every rank writes the job's world size too, for a reader that has not been told it.
        self._world_size_key = world_size_key(prefix)
        self._lock = threading.Lock()  # the rank's heartbeat thread and its main thread both publish
        self._world_size_written = False
        self.publishes = 0
        self.last_error: str | None = None  # the store went away (job ending, machine gone): said, never raised

    def publish(self, state: RankState) -> bool:
        """Write ``state`` now; False (and ``last_error``) when the store cannot be reached."""
        with self._lock:
            try:
                if not self._world_size_written and state.world_size is not None:
                    self._store.set(self._world_size_key, str(state.world_size))
                    self._world_size_written = True
                self._store.set(self._key, json.dumps(to_json(state)))
            except Exception as exc:  # the store's host ended (job over, machine gone): not the rank's error
                self.last_error = f"{type(exc).__name__}: {exc}"
                return False
            self.publishes += 1
            return True

    def publish_arrivals(self, text: str) -> bool:
        """The rank's recent arrivals (records/stragglers.py RankArrivals as JSON); False when the store is gone."""
        with self._lock:
            try:
                self._store.set(self._arrivals_key, text)
            except Exception as exc:  # the store's host ended: not the rank's error
                self.last_error = f"{type(exc).__name__}: {exc}"
                return False
            return True


@dataclass(frozen=True)
class RankView:
    """One rank as the reader last saw it."""

    rank: int
    status: RankState | None  # None: this rank never published
    heard_at: float | None  # the reader's monotonic clock when this rank's beat last changed

    @property
    def host(self) -> str | None:
        """The machine: its address toward the endpoint where known (containers share hostnames), else its hostname."""
        return self.status.machine if self.status is not None else None


class JobStoreReader:
    """Reader side, in any launcher: every rank of the job by global rank."""

    def __init__(self, store, world_size: int | None = None, job: str = "", restart_count: int = 0,
                 clock: Callable[[], float] = time.monotonic):
        self._store = store
        self._prefix = status_prefix(job, restart_count)
        # The first machine whose watcher declares a hang writes it here, so that the others follow at once
        # (supervision/watcher.py) instead of reading their ranks' ends, caused by its teardown, as a machine lost.
        self._hang_key = f"{self._prefix}/hang"
        self._clock = clock
        self.world_size = world_size
        self._last_beat: dict[int, int | None] = {}
        self._heard_at: dict[int, float] = {}

    def read(self) -> dict[int, RankView]:
        """Every global rank 0..world_size-1 (the world size learned from the store when not given)."""
        records = self._fetch()
        now = self._clock()
        views = {}
        for rank in range(self.world_size or 0):
            record = records.get(rank)
            if record is not None and record.beat != self._last_beat.get(rank, -1):
                self._last_beat[rank] = record.beat
                self._heard_at[rank] = now
            views[rank] = RankView(rank, record, self._heard_at.get(rank))
        return views

    def judging_records(self, views: Mapping[int, RankView], wall_now: float | None = None) -> dict[int, RankState]:
        """Records for name_culprits on this machine's wall clock: the heartbeat is when the beat was last heard
        here, so a machine whose clock runs ahead or behind is not taken for a frozen one; the rank's other times
        move by the same amount."""
        wall_now = time.time() if wall_now is None else wall_now
        mono_now = self._clock()
        return {rank: _on_this_clock(view.status, wall_now - (mono_now - view.heard_at))
                for rank, view in views.items() if view.status is not None and view.heard_at is not None}

    def announce_hang(self, machine: str, reason: str) -> None:
        """This machine's watcher declared a hang: said once, before it ends its ranks."""
        self._store.set(self._hang_key, json.dumps({"machine": machine, "reason": reason}))

    def acknowledge_hang(self, machine: str) -> None:
        """This machine's watcher read the announced hang and follows it: the declaring machine may end its ranks."""
        self._store.set(f"{self._hang_key}/seen/{machine}", "1")

    def acknowledged_hang(self, machines: set[str]) -> set[str]:
        """Which of ``machines`` acknowledged the announced hang."""
        return {m for m in machines if self._store.check([f"{self._hang_key}/seen/{m}"])}

    def announced_hang(self) -> dict | None:
        """A hang some machine's watcher declared ({"machine", "reason"}), or None."""
        if not self._store.check([self._hang_key]):
            return None
        try:
            value = json.loads(self._store.get(self._hang_key))
        except ValueError:
            return None
        return value if isinstance(value, dict) and isinstance(value.get("machine"), str) else None

    def read_arrivals(self) -> dict[int, bytes]:
        """Every rank's published arrivals that are there, as the ranks wrote them, by global rank."""
        return self._present({r: arrivals_key(self._prefix, r) for r in range(self.world_size or 0)})

    def write_stragglers(self, text: str) -> None:
        """The straggler watch's findings as they stand, for every machine of the job."""
        self._store.set(f"{self._prefix}/stragglers", text)

    def _fetch(self) -> dict[int, RankState]:
        if self.world_size is None:
            key = world_size_key(self._prefix)
            if not self._store.check([key]):
                return {}
            try:
                self.world_size = int(self._store.get(key))
            except ValueError:
                return {}
        return _decoded(self._present({r: rank_key(self._prefix, r) for r in range(self.world_size)}))

    def _present(self, keys: dict[int, str]) -> dict[int, bytes]:
        """The values of those of ``keys`` that are there, by rank: one round trip when all are, one check per key
        otherwise (a get on a missing key would wait for the store's timeout)."""
        if not self._store.check(list(keys.values())):
            keys = {r: k for r, k in keys.items() if self._store.check([k])}
        return dict(zip(keys, self._store.multi_get(list(keys.values()))))


def _on_this_clock(state: RankState, heard: float) -> RankState:
    shift = heard - state.heartbeat

    def moved(t: float | None) -> float | None:
        return None if t is None else t + shift

    return replace(state, heartbeat=heard, since=state.since + shift, failed_at=moved(state.failed_at),
                   failed_in_since=moved(state.failed_in_since), injected_at=moved(state.injected_at))


def _decoded(raw: Mapping[int, bytes]) -> dict[int, RankState]:
    out = {}
    for rank, value in raw.items():
        try:
            record = from_json(RankState, json.loads(value))
        except (ValueError, TypeError, RecordError):
            continue  # not ours, or half a value: skipped, as states.read_states skips an unreadable file
        if record.rank == rank:
            out[rank] = record
    return out
