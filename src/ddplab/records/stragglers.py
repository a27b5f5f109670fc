"""Stragglers in a running job: when each rank arrived at the collectives its flight recorder holds
(``RankArrivals``, what a rank publishes), and what the watcher found from them (``StragglerReport``: each rank's
lateness over time, and the ranks named as stragglers with the collectives and times behind each finding).

The rule that decides is supervision/stragglers.py's; docs/supervision.md states it with its numbers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from .codec import OMIT, RecordError, from_json
from .figures import Figure, LineChart, Mark, Series, Table


@dataclass(frozen=True)
class GroupArrivals:
    """One process group's collectives as one rank's flight recorder holds them, oldest first."""

    seqs: list[int]  # collective_seq_id
    created_us: list[int]  # time_created_ns - the record's base_ns, in microseconds: when this rank issued each
    # From the vendor's recorder with device timing on: each collective's time on the device, from when it could
    # start on its stream (after this rank's own work before it) to its end, in microseconds; None: not timed.
    device_us: list[float | None] | None = field(default=None, metadata=OMIT)


@dataclass(frozen=True)
class RankArrivals:
    """What one rank publishes: the collectives of its last minute or so, from its own flight recorder."""

    rank: int
    host: str | None
    read_at: float  # this rank's clock
    base_ns: int  # created_us counts from here (time_created_ns is the rank's wall clock)
    groups: dict[str, GroupArrivals]
    recorder: str | None  # the torch call that read it
    every_s: float  # how often it reads its recorder now (slower where a read costs more)
    read_cost_s: float  # what a read costs the rank: the dump and its decoding, the median of its last five
    world_size: int | None = None  # the job's ranks, as this rank was told
    unavailable: str | None = field(default=None, metadata=OMIT)  # why it has no times, where that is known


def arrivals_from_json(data: Any) -> RankArrivals:
    """What a rank wrote, read back: its few fields through the codec, its lists of thousands of numbers checked here
    (the codec's check of each element costs the launcher too much on every read)."""
    if not isinstance(data, dict) or not isinstance(data.get("groups"), dict):
        raise RecordError("$.groups", "an object of process groups", data)
    groups = {}
    for name, g in data["groups"].items():
        seqs, created = (g.get(k) if isinstance(g, dict) else None for k in ("seqs", "created_us"))
        device = g.get("device_us") if isinstance(g, dict) else None
        if not (_whole(seqs) and _whole(created) and len(seqs) == len(created)):
            raise RecordError(f"$.groups.{name}", "seqs and created_us: lists of whole numbers, as long", g)
        if device is not None and not (isinstance(device, list) and len(device) == len(seqs) and all(
                d is None or type(d) in (int, float) for d in device)):
            raise RecordError(f"$.groups.{name}.device_us", "a list of numbers or nulls, as long as seqs", device)
        groups[str(name)] = GroupArrivals(seqs, created, device)
    return replace(from_json(RankArrivals, {**data, "groups": {}}), groups=groups)


def _whole(values: Any) -> bool:
    return isinstance(values, list) and all(type(v) is int for v in values)


ENQUEUE = "enqueue times"  # time_created_ns of each rank's entry: when it issued the collective
DEVICE = "device times"  # duration_ms of each rank's entry, the ends taken as simultaneous


@dataclass(frozen=True)
class ArrivalRow:
    """One collective every rank of its group issued: when the first arrived, and how long after it each rank did."""

    group: str
    seq: int
    first_at: float  # the first rank's clock
    late_ms: dict[int, float]  # rank -> its arrival after the first, milliseconds


@dataclass(frozen=True)
class StragglerFinding:
    """A rank named a straggler: from when (``since``) until when it no longer was one (``until``; None: it still
    was at the end), and the window of collectives it was named on."""

    rank: int
    host: str | None
    group: str
    since: float  # when ddplab named it (the launcher's clock)
    until: float | None
    last_share: float  # of the window's collectives, those it arrived at last
    chance: float  # 1 / the group's ranks
    wait_share: float  # of all the time ranks waited for the last one, the share it caused
    cost_fraction: float  # of the others' time, spent waiting for it beyond the next-latest rank
    collectives: int  # compared in the window
    window_s: float  # from its first collective to its last
    basis: str  # ENQUEUE or DEVICE
    evidence: list[str]
    # the collectives of the window it cost the others most at (after the one left out), with every rank's lateness
    rows: list[ArrivalRow]

    def line(self) -> str:
        """The live line `ddplab launch` prints when it names the rank."""
        return (f"ddplab: straggler: {self.who()} makes the others wait: last at {self.last_share:.0%} of collectives "
                f"over the last {self.window_s:.0f} s (by chance {self.chance:.0%}), causing {self.wait_share:.0%} of "
                f"the waiting, {1000 * self.cost_fraction:.0f} ms of every second ({self.cost_fraction:.1%} of their "
                f"time) (since {clock(self.since)})")

    def who(self) -> str:
        return f"rank {self.rank}" + (f" (host {self.host})" if self.host else "") + \
            (f" in process group {self.group}" if self.group != "0" else "")


@dataclass(frozen=True)
class LatenessSeries:
    """One rank's mean lateness (its arrival after the first rank's) per interval of the run."""

    rank: int
    points: list[tuple[float, float]]  # (seconds since the launch, mean lateness in seconds)


WATCHED, OFF, NO_TIMES = "watched", "off", "no times"


@dataclass(frozen=True)
class StragglerReport:
    """What the straggler watch saw of a job: whether it could watch (``status``, ``why`` not), on what times, how
    many collectives it compared, what reading the recorders cost the ranks, its findings and the lateness chart."""

    status: str  # WATCHED | OFF | NO_TIMES
    why: str | None = None  # why nothing was watched, or why a rank stopped publishing while it was
    basis: str | None = None
    collectives: int = 0
    every_s: float | None = None  # the slowest rank's read cadence at the end
    read_cost_s: float | None = None  # what a read cost the rank where it cost most (its median of five)
    findings: list[StragglerFinding] = field(default_factory=list)
    lateness: list[LatenessSeries] = field(default_factory=list)
    window_s: float | None = None
    started_at: float | None = None  # the launch: the chart's time origin
    watch_cpu_s: float | None = None  # the launcher's CPU time spent applying the rule

    def summary(self) -> str:
        if self.status != WATCHED:
            return f"stragglers: not watched ({self.why})" if self.why else "stragglers: not watched"
        stopped = f"; watched until {self.why}" if self.why else ""
        if not self.findings:
            return (f"stragglers: none named ({self.collectives} collectives compared on {self.basis}; each rank read "
                    f"its recorder every {self.every_s:g} s, {1000 * (self.read_cost_s or 0):.0f} ms a read{stopped})")
        named = ", ".join(f"{f.who()} from {clock(f.since)}" + (f" to {clock(f.until)}" if f.until else "")
                          for f in self.findings)
        return f"stragglers: {named}{stopped}"

    def figures(self, stage: str) -> list[Figure]:
        """report.html: each rank's lateness over time, the findings with their evidence."""
        if self.status != WATCHED:
            return [Table("stragglers", "Stragglers", f"{stage}: not watched", ["what", "found"],
                          [["stragglers", self.summary()]])]
        charts: list[Figure] = []
        if self.lateness:
            marks = [Mark(f"rank {f.rank} named", f.since - self.started_at, "detected")
                     for f in self.findings if self.started_at is not None]
            charts.append(LineChart(
                "straggler-lateness", "Per-rank lateness at collectives", f"{stage}: each rank's mean arrival after "
                f"the first rank, at the collectives every rank issued ({self.basis})", "time since the launch",
                "lateness", [Series(f"rank {s.rank}", list(s.points)) for s in self.lateness], x_unit="s",
                y_unit="s", marks=marks))
        rows = [["summary", self.summary()], *([f.who(), "\n".join(f.evidence)] for f in self.findings)]
        return [*charts, Table("stragglers", "Stragglers", f"{stage}: the rule is in docs/supervision.md "
                                                          "(Stragglers)", ["rank", "evidence"], rows)]


def clock(at: float | None) -> str:
    """12:03:10, in the launcher's local time."""
    return time.strftime("%H:%M:%S", time.localtime(at)) if at is not None else "?"
