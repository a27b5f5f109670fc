"""The launcher's straggler watch: a thread that reads when every rank arrived at its recent collectives (what
arrivals.py publishes), applies the straggler rule (stragglers.py) and says when a rank becomes or stops being a
straggler: on the terminal, in stragglers.json and, across machines, in the job's store.

It only watches, on its own thread and store connection, so the hang rules wait for none of it.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from dataclasses import replace
from typing import Callable

from ..basics.files import write_text_atomic
from ..records.codec import RecordError, to_json
from ..records.stragglers import (NO_TIMES, OFF, WATCHED, LatenessSeries, RankArrivals, StragglerFinding,
                                  StragglerReport, arrivals_from_json, clock)
from ..basics.rundir import RunDir
from . import sources, stragglers

POLL_S = 1.0
STORE_POLL_S = 5.0  # across machines: each poll of the store moves every rank's record over the network
# What the watch remembers of the collectives it took: longer than the ranks publish (arrivals.KEEP_S), so none is
# taken twice, and the rule's window lies within it.
HORIZON_S = 120.0
BIN_S = 10.0  # the lateness chart's interval, doubled whenever it would have more than MAX_BINS
MAX_BINS = 500


class StragglerWatch:
    """``say``: where the live lines go (None: nowhere); ``enabled`` False: nothing is watched, and the report says
    ``off_reason``."""

    def __init__(self, run: RunDir, started_at: float, *, say: Callable[[str], None] | None = None, job: str = "",
                 enabled: bool = True, off_reason: str = "switched off", open_reader=sources.open_reader):
        self.run, self.started_at, self.job = run, started_at, job
        self.enabled, self.off_reason = enabled, off_reason
        self._say = say
        self._open_reader = open_reader
        self._reader = None  # the job's store, across machines
        self._rule = stragglers.Rule()
        self._seen: dict[tuple[str, int], float] = {}  # the collectives taken, when they began
        self._recent: list[stragglers.CollectiveArrivals] = []
        self._reads: dict[int, float] = {}  # rank -> read_at of the record last used
        self._files: dict[int, tuple[int, int]] = {}  # rank -> (mtime, size) of its file as last read
        self._store_values: dict[int, bytes] = {}  # rank -> its record in the job's store as last read
        self._next_store_read = 0.0
        self._last: dict[int, RankArrivals] = {}
        self._open: dict[str, StragglerFinding] = {}  # group -> its straggler's finding, while named
        self.findings: list[StragglerFinding] = []
        self._bins: dict[int, dict[int, list[float]]] = {}  # bin -> rank -> [sum of lateness, count]
        self._bin_s = BIN_S
        self._compared = 0
        self.cpu_s = 0.0  # the launcher's CPU time spent watching (its thread's)
        self._basis: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ddplab-stragglers", daemon=True)

    def __enter__(self) -> "StragglerWatch":
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=sources.STORE_TIMEOUT_S + 5)
        if self.enabled:
            self._quietly(self.update)  # the ranks' last reads, written as they ended

    # ------------------------------------------------------------------------------------------ the watch

    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            self._quietly(self.update)

    def update(self) -> None:
        """Read what the ranks published; when a rank has read its recorder again, judge the new collectives."""
        started = time.thread_time()
        try:
            self._update()
        finally:
            self.cpu_s += time.thread_time() - started

    def _update(self) -> None:
        published = self._published()
        changes: list[stragglers.Change] = []
        with self._lock:
            fresh = {r: a for r, a in published.items() if self._reads.get(r) != a.read_at}
            if not fresh:
                return
            self._last.update(fresh)
            self._reads.update({r: a.read_at for r, a in fresh.items()})
            world = max((a.world_size or 0 for a in self._last.values()), default=0)
            usable = {r: a for r, a in self._last.items() if a.groups}
            if world and any(r not in usable for r in range(world)):
                return  # every rank must have read once: a group's collectives are compared across all its ranks
            new = stragglers.collectives_from(usable, taken=self._seen)
            if not new:
                return
            self._take(new)
            changes = self._rule.judge(self._recent)
            now = time.time()
            for change in changes:
                self._note(change, now)
        if changes:
            self._publish_findings()

    def _take(self, new: list[stragglers.CollectiveArrivals]) -> None:
        for c in new:
            self._seen[(c.group, c.seq)] = c.first
            self._bin(c)
        self._compared += len(new)
        self._basis = new[-1].basis
        horizon = max(c.first for c in new) - HORIZON_S
        self._recent = sorted((c for c in self._recent + new if c.first >= horizon),
                              key=lambda c: (c.first, c.group, c.seq))
        self._seen = {k: t for k, t in self._seen.items() if t >= horizon}

    def _bin(self, c: stragglers.CollectiveArrivals) -> None:
        index = int(max(0.0, c.first - self.started_at) // self._bin_s)
        for r in c.at:
            _add(self._bins, index, r, c.lateness(r), 1)
        if len(self._bins) > MAX_BINS:  # a long job: coarser intervals, the same memory
            merged: dict[int, dict[int, list[float]]] = {}
            for i, by_rank in self._bins.items():
                for r, (total, count) in by_rank.items():
                    _add(merged, i // 2, r, total, count)
            self._bins, self._bin_s = merged, 2 * self._bin_s

    def _note(self, change: stragglers.Change, now: float) -> None:
        host = self._last[change.rank].host if change.rank in self._last else None
        w = change.window
        if change.named:
            finding = StragglerFinding(change.rank, host, change.group, now, None, round(w.last_share, 4),
                                       round(1 / change.ranks, 4), round(w.wait_share, 4),
                                       round(w.cost_fraction, 4), w.collectives, round(w.span_s, 1),
                                       change.basis, change.evidence(), change.rows)
            self._open[change.group] = finding
            self.findings.append(finding)
            self._tell(finding.line())
            return
        finding = self._open.pop(change.group, None)
        if finding is None:
            return
        ended = replace(finding, until=now)
        self.findings[self.findings.index(finding)] = ended
        self._tell(f"ddplab: straggler: {finding.who()} is no longer a straggler (last at {w.last_share:.0%} of "
                   f"collectives over the last {w.span_s:.0f} s, costing the others "
                   f"{1000 * w.cost_fraction:.0f} ms of every second; named at {clock(finding.since)})")

    def _tell(self, line: str) -> None:
        if self._say is not None:
            self._quietly(lambda: self._say(line))

    # ------------------------------------------------------------------------------------------ what it read

    def _published(self) -> dict[int, RankArrivals]:
        """Every rank's latest record, decoded only where it changed since the last poll."""
        raw = self._from_store()
        if raw is None:
            raw = {}
            for rank in self.run.ranks_seen():
                path = self.run.arrivals_file(rank)
                with contextlib.suppress(OSError):
                    stat = path.stat()
                    if self._files.get(rank) == (stat.st_mtime_ns, stat.st_size):
                        continue
                    raw[rank] = path.read_bytes()
                    self._files[rank] = (stat.st_mtime_ns, stat.st_size)
        out = {}
        for rank, text in raw.items():
            try:
                record = arrivals_from_json(json.loads(text))
            except (ValueError, TypeError, RecordError):
                continue  # a file being replaced, or not ours: the next poll reads it
            if record.rank == rank:
                out[rank] = record
        return out

    def _from_store(self) -> dict[int, bytes] | None:
        """Every rank's changed record from the job's store, across machines; None: read this machine's files."""
        if self._reader is None:
            store = sources.store_of(sources.listened(self.run))
            if store is None:
                return None
            self._reader = self._open_reader(*store, self.job) or False
        if not self._reader:
            return None
        if time.monotonic() < self._next_store_read:
            return {}
        self._next_store_read = time.monotonic() + STORE_POLL_S
        try:
            if not self._reader.world_size:
                self._reader.read()  # learns the world size from the statuses
            raw = self._reader.read_arrivals()
        except Exception:  # noqa: BLE001 - the store went away (the job ending): this machine's files say the rest
            return None
        changed = {r: v for r, v in raw.items() if self._store_values.get(r) != v}
        self._store_values.update(changed)
        return changed

    def _publish_findings(self) -> None:
        text = json.dumps(to_json(self.report()))
        self._quietly(lambda: write_text_atomic(self.run.stragglers_file, text, durable=False))
        if self._reader:
            self._quietly(lambda: self._reader.write_stragglers(text))

    @staticmethod
    def _quietly(act) -> None:
        with contextlib.suppress(Exception):  # noqa: BLE001 - the watch never touches the job's fate
            act()

    # ------------------------------------------------------------------------------------------ the report

    def report(self) -> StragglerReport:
        if not self.enabled:
            return StragglerReport(OFF, why=self.off_reason)
        with self._lock:
            reads = list(self._last.values())
            if not self._compared:
                why = next((a.unavailable for a in reads if a.unavailable), None)
                if why is None:
                    why = ("no rank read its flight recorder while in its process group" if not reads else
                           "no collective was read from every rank")
                return StragglerReport(NO_TIMES, why=why, started_at=self.started_at)
            series = {}
            for index in sorted(self._bins):
                middle = (index + 0.5) * self._bin_s
                for r, (total, count) in self._bins[index].items():
                    series.setdefault(r, []).append((round(middle, 3), round(total / count, 6)))
            stopped = next((f"rank {a.rank}: {a.unavailable}" for a in reads if a.unavailable), None)
            return StragglerReport(
                WATCHED, why=stopped, basis=self._basis, collectives=self._compared,
                every_s=max(a.every_s for a in reads), read_cost_s=max(a.read_cost_s for a in reads),
                findings=list(self.findings), lateness=[LatenessSeries(r, p) for r, p in sorted(series.items())],
                window_s=self._rule.window_s, started_at=self.started_at, watch_cpu_s=round(self.cpu_s, 3))


def _add(bins: dict[int, dict[int, list[float]]], index: int, rank: int, total: float, count: int) -> None:
    acc = bins.setdefault(index, {}).setdefault(rank, [0.0, 0])
    acc[0] += total
    acc[1] += count
