"""Each rank's status through the job's own c10d store, readable by global rank from any machine.

The status files of status.py live on the machine a rank runs on, so a launcher sees only its
own ranks. Here every rank publishes the same record (phase, collectives entered and done, op,
numel, heartbeat) plus where it runs (host, address, pid, node rank) under one key per global rank
in the store every machine already reaches: the rendezvous store (rendezvous.py).

Writer (inside a rank): ``StatusPublisher``. Phase changes (before-init, in-init, running,
finished, failed: a handful per run) are published at once; entering and leaving a collective only update memory
(about a microsecond: the hot path of a 10,000-op storm), and a heartbeat thread publishes the
current record every ``interval_s``. One publish is one ``store.set`` (a round trip to the store).

Reader (in any launcher): ``StatusReader``. Remote clocks are not compared with the reader's:
each record carries a beat counter, and the reader notes on its own clock when a rank's beat
last changed (``heard_at``). ``judging_records`` gives status.py's ``name_culprits`` records
whose heartbeat is that local time, so one judge works for files and for the store.

Keys: ``ddplab/status/attempt_<restart>/<global rank>`` (``status_prefix``), so an elastic restart
never reads the previous attempt's ranks.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Callable, Mapping
from ..records.codec import RecordError, from_json
from ..records.session import RankState

PUBLISH_INTERVAL_S = 0.5  # as status.py's HEARTBEAT_S: what the supervisor's staleness rule expects
KEY_ROOT = "ddplab/status"


def status_prefix(restart_count: int = 0) -> str:
    return f"{KEY_ROOT}/attempt_{restart_count}"


def status_key(rank: int, restart_count: int = 0) -> str:
    return f"{status_prefix(restart_count)}/{rank}"


def world_size_key(restart_count: int = 0) -> str:
    """Every rank writes the job's world size here too, so a reader that has not been told it
    learns it from whichever rank published first."""
    return f"{status_prefix(restart_count)}/world_size"


def open_store(host: str, port: int, timeout_s: float = 30.0):
    """A client connection of its own to the job's store (the publisher's thread and the reader
    must not share the process group's). Elastic tells each rank where: MASTER_ADDR/MASTER_PORT."""
    from torch.distributed import TCPStore

    return TCPStore(host, port, None, False, timedelta(seconds=timeout_s))


class StatusPublisher:
    """Writer side, inside a rank: this rank's status under its key in the job's store."""

    def __init__(self, store, rank: int, world_size: int, *, local_rank: int | None = None,
                 node_rank: int | None = None, address: str | None = None, restart_count: int = 0,
                 interval_s: float = PUBLISH_INTERVAL_S, clock: Callable[[], float] = time.time,
                 heartbeat: bool = True):
        self._store = store
        self._key = status_key(rank, restart_count)
        self._world_size_key = world_size_key(restart_count)
        self._clock = clock
        self._interval_s = interval_s
        self._lock = threading.Lock()  # the record
        self._publish_lock = threading.Lock()  # one store.set at a time, in beat order
        self._stop = threading.Event()
        self.publishes = 0
        self.last_error: str | None = None  # the store went away (job ending): said, never raised
        now = clock()
        self.state = {"rank": rank, "local_rank": local_rank, "node_rank": node_rank, "world_size": world_size,
                      "host": socket.gethostname(), "address": address, "pid": os.getpid(),
                      "phase": "before-init", "seq": 0, "done": 0, "op": None, "numel": None,
                      "since": now, "heartbeat": now, "beat": 0}
        self.publish()
        self._thread = None
        if heartbeat:
            self._thread = threading.Thread(target=self._beat, name="ddplab-status-publisher", daemon=True)
            self._thread.start()

    @classmethod
    def from_environment(cls, store, environ: Mapping[str, str] = os.environ, **kwargs) -> StatusPublisher:
        """The publisher for an elastic worker: rank, world size, node rank and restart from the
        variables elastic sets; the machine's address from the launcher (exposure.NODE_ADDRESS_ENV)."""
        from ..exposure import NODE_ADDRESS_ENV

        def number(name: str) -> int | None:
            value = environ.get(name)
            return int(value) if value is not None and value.isdigit() else None

        return cls(store, number("RANK") or 0, number("WORLD_SIZE") or 1, local_rank=number("LOCAL_RANK"),
                   node_rank=number("GROUP_RANK"), address=environ.get(NODE_ADDRESS_ENV),
                   restart_count=number("TORCHELASTIC_RESTART_COUNT") or 0, **kwargs)

    def phase(self, phase: str, **extra) -> None:
        """A phase change (a handful per run) is published at once."""
        with self._lock:
            self.state.update(phase=phase, since=self._clock(), **extra)
        self.publish()

    def enter_collective(self, op: str, numel: int) -> int:
        """Memory only: the heartbeat thread publishes it within ``interval_s``."""
        with self._lock:
            seq = self.state["seq"] + 1
            self.state.update(phase="in-collective", seq=seq, op=op, numel=numel, since=self._clock())
            return seq

    def leave_collective(self) -> None:
        with self._lock:
            self.state.update(phase="running", done=self.state["seq"], since=self._clock())

    def publish(self) -> bool:
        """Write the current record now; False (and ``last_error``) when the store cannot be reached.

        The round trip happens outside the state lock, so a collective entered meanwhile does not
        wait for the network."""
        with self._publish_lock:
            with self._lock:
                self.state["heartbeat"] = self._clock()
                self.state["beat"] += 1
                snapshot = dict(self.state)
            try:
                if snapshot["beat"] == 1:
                    self._store.set(self._world_size_key, str(snapshot["world_size"]))
                self._store.set(self._key, json.dumps(snapshot))
            except Exception as exc:  # the store's host ended (job over, machine gone): not the rank's error
                self.last_error = f"{type(exc).__name__}: {exc}"
                return False
            self.publishes += 1
            return True

    def close(self) -> None:
        """Stop the heartbeat; publish the final record once more."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._interval_s + 5)
        self.publish()

    def _beat(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.publish()


@dataclass(frozen=True)
class RankView:
    """One rank as the reader last saw it."""

    rank: int
    status: dict | None  # None: this rank never published
    heard_at: float | None  # the reader's monotonic clock when this rank's beat last changed

    @property
    def host(self) -> str | None:
        """The machine: its address toward the endpoint where known (namespaces and containers may
        all share one hostname), else its hostname."""
        if self.status is None:
            return None
        return self.status.get("address") or self.status.get("host")


class StatusReader:
    """Reader side, in any launcher: every rank of the job by global rank."""

    def __init__(self, store, world_size: int | None = None, restart_count: int = 0,
                 clock: Callable[[], float] = time.monotonic):
        self._store = store
        self._restart_count = restart_count
        self._clock = clock
        self.world_size = world_size
        self._last_beat: dict[int, int] = {}
        self._heard_at: dict[int, float] = {}

    def read(self) -> dict[int, RankView]:
        """Every global rank 0..world_size-1 (world size learned from the records when not given)."""
        records = self._fetch()
        now = self._clock()
        views = {}
        for rank in range(self._known_world_size(records)):
            record = records.get(rank)
            if record is not None and record.get("beat") != self._last_beat.get(rank):
                self._last_beat[rank] = record.get("beat")
                self._heard_at[rank] = now
            views[rank] = RankView(rank, record, self._heard_at.get(rank))
        return views

    def judging_records(self, views: Mapping[int, RankView], wall_now: float | None = None) -> dict[int, RankState]:
        """Records for status.name_culprits: heartbeat on this machine's wall clock (when the beat was
        last heard), so a machine whose clock runs ahead or behind is not taken for a frozen one."""
        wall_now = time.time() if wall_now is None else wall_now
        mono_now = self._clock()
        out = {}
        for rank, view in views.items():
            if view.status is None or view.heard_at is None:
                continue
            try:
                out[rank] = from_json(RankState, {**view.status, "heartbeat": wall_now - (mono_now - view.heard_at)})
            except RecordError:
                continue  # not a rank's record
        return out

    def _known_world_size(self, records: Mapping[int, dict]) -> int:
        if self.world_size is None:
            sizes = [r.get("world_size") for r in records.values() if isinstance(r.get("world_size"), int)]
            if sizes:
                self.world_size = max(sizes)
        return self.world_size or (max(records) + 1 if records else 0)

    def _fetch(self) -> dict[int, dict]:
        """One round trip when every rank has published; one check per rank otherwise (a get on a
        missing key would wait for the store's timeout)."""
        size = self.world_size
        if size is None:
            return self._fetch_probing()
        keys = [status_key(r, self._restart_count) for r in range(size)]
        if self._store.check(keys):
            return _decoded(dict(zip(range(size), self._store.multi_get(keys))))
        present = {r: k for r, k in enumerate(keys) if self._store.check([k])}
        values = self._store.multi_get(list(present.values())) if present else []
        return _decoded(dict(zip(present, values)))

    def _fetch_probing(self) -> dict[int, dict]:
        """Before any rank has published, there is nothing to read, not even the world size."""
        key = world_size_key(self._restart_count)
        if not self._store.check([key]):
            return {}
        try:
            self.world_size = int(self._store.get(key))
        except ValueError:
            return {}
        return self._fetch()


def _decoded(raw: Mapping[int, bytes]) -> dict[int, dict]:
    out = {}
    for rank, value in raw.items():
        try:
            record = json.loads(value)
        except (ValueError, TypeError):
            continue  # not ours, or half a value: skipped, as status.read_all skips an unreadable file
        if isinstance(record, dict) and record.get("rank") == rank:
            out[rank] = record
    return out
