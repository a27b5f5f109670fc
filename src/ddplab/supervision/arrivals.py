"""A rank's side of the straggler watch: when it arrived at each collective, read from its own flight recorder
and published for the launcher (``RankArrivals``: arrivals.json, and the job's store across machines).

A read of the recorder costs its whole buffer, however few entries are new, and holds the GIL. So the rank reads
from the beacon's side thread at a slow cadence (``ARRIVALS_ENV``, doubled until a read costs at most ``BUDGET``
of its time), on multiples of it on the wall clock, so that ranks read within a beat of each other and their
buffers hold the same collectives. A read or a write that fails is skipped, quietly.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import statistics
import time
from typing import Callable

from ..basics.files import write_text_atomic
from ..platform import flight_recorder
from ..records.codec import to_json
from ..records.stragglers import GroupArrivals, RankArrivals
from ..basics.rundir import RunDir

ARRIVALS_ENV = "DDPLAB_ARRIVALS"  # set by the launcher: the shortest read cadence in seconds; absent: never read
DEFAULT_EVERY_S = 5.0
# Of the rank's time spent reading its recorder, as the read measures itself: what a read costs the training loop
# is about twice that (the GIL held, the others waiting), which this keeps under half of the 0.5 % allowed.
BUDGET = 0.0015
BUDGET_ENV = "DDPLAB_ARRIVALS_BUDGET"  # for the cost benchmark only: reads as often as asked
MAX_EVERY_S = 320.0
NAMING_EVERY_S = 40.0  # a straggler that starts right after a read is named at the next: within the minute
# A read holds the GIL, so the beacon's heartbeat waits for it too: a rank whose reads take this long twice in a row
# (a buffer of tens of thousands of entries) stops reading, and says why, before the hang rules take it for frozen.
MAX_READ_S = 1.0
KEEP_S = 90.0  # of collectives published: the launcher's window (60 s) and a read's slack
MAX_KEPT = 6000  # per group


def from_environment(run: RunDir, rank: int, publish: Callable[[str], object] | None = None,
                     environ=os.environ) -> "ArrivalLog | None":
    """The rank's arrival log when the launcher asked for one (ARRIVALS_ENV), else None."""
    text = environ.get(ARRIVALS_ENV)
    if not text:
        return None
    try:
        every = max(0.5, float(text))
    except ValueError:
        every = DEFAULT_EVERY_S
    return ArrivalLog(run, rank, every, publish, environ)


def cadence(base_s: float, cost_s: float, budget: float = BUDGET) -> float:
    """The read cadence: ``base_s`` doubled until a read of ``cost_s`` costs at most ``budget`` of the time, and past
    NAMING_EVERY_S only until it costs at most twice that: a busy machine stretches a read's wall time far more than
    its work, and a slower cadence would delay the naming past the minute."""
    every = base_s
    while every < MAX_EVERY_S and cost_s > budget * every * (2 if every >= NAMING_EVERY_S else 1):
        every *= 2
    return every


def next_read(now: float, every_s: float) -> float:
    """The next multiple of ``every_s`` on the wall clock after ``now``: the same moment on every rank."""
    return (math.floor(now / every_s) + 1) * every_s


class ArrivalLog:
    """The collectives of this rank's last ``KEEP_S``, by process group, refreshed from its recorder."""

    def __init__(self, run: RunDir, rank: int, every_s: float, publish: Callable[[str], object] | None = None,
                 environ=os.environ):
        self.run, self.rank = run, rank
        self.base_s = self.every_s = every_s
        self._publish = publish
        self._environ = environ
        try:
            self._budget = float(environ.get(BUDGET_ENV) or BUDGET)
        except ValueError:
            self._budget = BUDGET
        self._host = socket.gethostname()
        world = environ.get("WORLD_SIZE", "")
        self._world_size = int(world) if world.isdigit() else None
        self._was_in_group = False
        self._kept: dict[str, dict[int, tuple[int, float | None]]] = {}  # group -> seq -> (created ns, device us)
        self._costs: list[float] = []
        self._recorder: str | None = None
        self.unavailable: str | None = None
        self._next = next_read(time.time(), self.every_s)

    def tick(self, now: float, in_process_group: bool) -> None:
        """From the beacon's side thread, every beat: read, keep and publish when the cadence says so; never raises."""
        self._was_in_group = self._was_in_group or in_process_group
        if now < self._next or not in_process_group:
            return
        with contextlib.suppress(Exception):  # noqa: BLE001 - the straggler watch loses a read; the rank goes on
            self._read_and_publish(now)
        if self._next != math.inf:
            self._next = next_read(time.time(), self.every_s)

    def last_read(self) -> None:
        """One more read as the rank ends (its script finished), so that a job's last seconds are judged too."""
        if self._was_in_group and self._next != math.inf:
            with contextlib.suppress(Exception):  # noqa: BLE001 - as in tick
                self._read_and_publish(time.time())

    def _read_and_publish(self, now: float) -> None:
        started = time.perf_counter()
        read = flight_recorder.read_entries()
        if read is None:
            self.unavailable = flight_recorder.why_no_entries(self._environ)
            if self.unavailable is None:
                return  # nothing recorded yet
        else:
            self._recorder, entries = read
            self._keep(entries)
        self._costs = (self._costs + [time.perf_counter() - started])[-5:]
        typical = statistics.median(self._costs)
        self.every_s = cadence(self.base_s, typical, self._budget)
        if len(self._costs) >= 2 and min(self._costs[-2:]) > MAX_READ_S:
            self.unavailable = (f"reading the flight recorder took {self._costs[-1]:.1f} s, twice in a row: too long "
                                f"to hold the rank's GIL for (a large TORCH_FR_BUFFER_SIZE?), so it stopped reading")
            self._kept.clear()
            self._next = math.inf
        text = json.dumps(to_json(self.record(now, typical)))
        with contextlib.suppress(Exception):  # noqa: BLE001 - a full disk costs the watch this read only
            write_text_atomic(self.run.arrivals_file(self.rank), text, durable=False)
        if self._publish is not None:
            self._publish(text)

    def _keep(self, entries: list[dict]) -> None:
        for entry in entries:
            if entry.get("is_p2p") or not entry.get("time_created_ns"):
                continue
            seq = int(entry.get("collective_seq_id", 0))
            if seq <= 0:
                continue
            group = str((entry.get("process_group") or [entry.get("pg_id")])[0])
            duration = entry.get("duration_ms")
            kept = self._kept.setdefault(group, {})
            if seq not in kept or kept[seq][1] is None:  # a device time comes once the collective has ended
                kept[seq] = (int(entry["time_created_ns"]), None if duration is None else 1000.0 * float(duration))
        for group, seqs in self._kept.items():
            newest = max(t for t, _ in seqs.values())
            keep = sorted((s for s, (t, _) in seqs.items() if t >= newest - KEEP_S * 1e9))[-MAX_KEPT:]
            self._kept[group] = {s: seqs[s] for s in keep}

    def record(self, now: float, cost_s: float) -> RankArrivals:
        created = [t for seqs in self._kept.values() for t, _ in seqs.values()]
        base = min(created) if created else 0
        groups = {}
        for group, seqs in self._kept.items():
            order = sorted(seqs)
            device = [seqs[s][1] for s in order]
            groups[group] = GroupArrivals(order, [(seqs[s][0] - base) // 1000 for s in order],
                                          device if any(d is not None for d in device) else None)
        return RankArrivals(self.rank, self._host, now, base, groups, self._recorder, self.every_s,
                            round(cost_s, 6), self._world_size, self.unavailable)
