"""The straggler rule, pure: from when each rank arrived at the same collectives (``RankArrivals``), which rank
makes the others wait, and how much that costs them. The straggler watch (straggler_watch.py) feeds it.

At one collective, a rank's **lateness** is its arrival after the first rank's; the **last** rank alone cost the
others its arrival after the next-latest rank's. Arrivals are enqueue times (the rank's wall clock), or, where
every rank's entry has a device time, the device times with every rank's end taken as one moment (the host may
run far ahead of the device).

Over the last ``WINDOW_S`` of a group's collectives (at least ``MIN_COLLECTIVES``), a rank's **cost** is the time
the others waited for it, overlapping waits merged, without its largest one (a one-off pause is no straggler). It
is **named** when that cost is at least ``COST_NAMED`` of the others' time and ``MIN_COST_S`` in all, over
``MIN_WAITS`` waits, and it is last, or causes the waiting, at least ``named_share(n)`` of the time (a rank paused
now and then is last rarely, but for long). It stays named until its cost falls below ``COST_KEPT`` or both shares
below ``kept_share(n)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..records.stragglers import DEVICE, ENQUEUE, ArrivalRow, RankArrivals

# The window: long enough to hold many steps, short enough that a rank which becomes a straggler fills half of it
# soon after the ranks' next read (they read every 40 s at most): named within the minute.
WINDOW_S = 30.0
MIN_COLLECTIVES = 50
COST_NAMED = 0.10  # of the others' time
COST_KEPT = 0.05
# A window of a fast loop's first 50 collectives can span under a second, where a few milliseconds of scheduling per
# step are a large share and name a healthy rank (docs/RESULTS.md). A rank must have cost the others this much first.
MIN_COST_S = 0.25
MIN_WAITS = 5
EVIDENCE_ROWS = 5


def named_share(n: int) -> float:
    """The share (of being last, or of the waiting caused) that names a rank among ``n``: halfway between chance
    and always: 75 % of 2 ranks, 67 % of 3, 63 % of 4."""
    return (1 + 1 / n) / 2


def kept_share(n: int) -> float:
    """The share below which a named rank is no longer one: halfway between chance and ``named_share``."""
    return (1 / n + named_share(n)) / 2


@dataclass(frozen=True)
class CollectiveArrivals:
    """One collective every rank of its group issued, with each rank's arrival (seconds)."""

    group: str
    seq: int
    at: dict[int, float]
    basis: str
    first: float
    last_rank: int
    cost: float  # what the last rank alone cost the others: its arrival after the next-latest's

    @classmethod
    def of(cls, group: str, seq: int, at: dict[int, float], basis: str) -> "CollectiveArrivals":
        ordered = sorted(at, key=lambda r: (at[r], r))
        return cls(group, seq, at, basis, at[ordered[0]], ordered[-1], at[ordered[-1]] - at[ordered[-2]])

    def lateness(self, rank: int) -> float:
        return self.at[rank] - self.first

    def row(self) -> ArrivalRow:
        return ArrivalRow(self.group, self.seq, round(self.first, 6),
                          {r: round(1000 * self.lateness(r), 3) for r in sorted(self.at)})


def collectives_from(arrivals: dict[int, RankArrivals], taken=frozenset()) -> list[CollectiveArrivals]:
    """Every collective all ranks of its group published, not in ``taken`` ((group, seq)), oldest first; where a
    group has device times, only those every rank has (enqueue and device times are two clocks)."""
    members: dict[str, list[int]] = {}
    for rank, a in sorted(arrivals.items()):
        for group in a.groups:
            members.setdefault(group, []).append(rank)
    out = []
    for group, ranks in members.items():
        if len(ranks) < 2:
            continue
        by_rank = {r: _by_seq(arrivals[r], group) for r in ranks}
        timed = any(arrivals[r].groups[group].device_us is not None for r in ranks)
        common = set.intersection(*(set(seqs) for seqs in by_rank.values()))
        for seq in sorted(common):
            if (group, seq) in taken:
                continue
            created = {r: by_rank[r][seq][0] for r in ranks}
            device = {r: by_rank[r][seq][1] for r in ranks}
            if not timed:
                out.append(CollectiveArrivals.of(group, seq, created, ENQUEUE))
            elif all(d is not None for d in device.values()):
                # the ends are one moment on every rank: each arrived its device time before it
                end = max(created.values()) + max(device.values())
                out.append(CollectiveArrivals.of(group, seq, {r: end - device[r] for r in ranks}, DEVICE))
    return sorted(out, key=lambda c: (c.first, c.group, c.seq))


def _by_seq(arrivals: RankArrivals, group: str) -> dict[int, tuple[float, float | None]]:
    g = arrivals.groups[group]
    base = arrivals.base_ns / 1e9
    device = g.device_us or [None] * len(g.seqs)
    return {seq: (base + created / 1e6, None if d is None else d / 1e6)
            for seq, created, d in zip(g.seqs, g.created_us, device)}


@dataclass(frozen=True)
class RankWindow:
    """One rank over a window of collectives of one group."""

    rank: int
    collectives: int
    last: int  # collectives it arrived at last
    last_share: float
    cost_s: float  # the others' waiting for it, its overlapping waits counted once, its largest left out
    wait_share: float  # of every rank's cost
    cost_fraction: float  # cost_s / the window's length
    waits: int
    largest_wait_s: float  # the one left out
    span_s: float


def window_of(collectives: list[CollectiveArrivals]) -> dict[int, RankWindow]:
    """Each rank's shares and cost over ``collectives`` (one group's, in one window)."""
    if not collectives:
        return {}
    ranks = sorted(collectives[0].at)
    span = max(max(c.at.values()) for c in collectives) - min(c.first for c in collectives)
    lasts: dict[int, list[CollectiveArrivals]] = {r: [] for r in ranks}
    for c in collectives:
        lasts[c.last_rank].append(c)
    waits = {r: _waits(lasts[r]) for r in ranks}
    costs = {r: sum(w) - max(w, default=0.0) for r, w in waits.items()}
    total = sum(costs.values())
    return {r: RankWindow(r, len(collectives), len(lasts[r]), len(lasts[r]) / len(collectives), costs[r],
                          costs[r] / total if total > 0 else 0.0, costs[r] / span if span > 0 else 0.0,
                          len(waits[r]), max(waits[r], default=0.0), span)
            for r in ranks}


def _waits(lasts: list[CollectiveArrivals]) -> list[float]:
    """The waits one rank caused, from the collectives it was last at: overlapping intervals are one wait (DDP's
    buckets are waited for together at the end of backward), worth the largest of them."""
    waits: list[float] = []
    end = None
    for c in sorted(lasts, key=lambda c: c.at[c.last_rank] - c.cost):
        start, stop = c.at[c.last_rank] - c.cost, c.at[c.last_rank]
        if end is not None and start < end:
            waits[-1] = max(waits[-1], c.cost)
            end = max(end, stop)
        else:
            waits.append(c.cost)
            end = stop
    return waits


def is_straggler(w: RankWindow, n: int, named: bool) -> bool:
    """The rule (module docstring); ``named``: whether the rank is named now (lower thresholds: no flapping)."""
    if w.collectives < MIN_COLLECTIVES:
        return named
    if w.cost_fraction < (COST_KEPT if named else COST_NAMED) or w.waits < MIN_WAITS:
        return False
    if not named and w.cost_s < MIN_COST_S:
        return False
    share = kept_share(n) if named else named_share(n)
    return w.last_share >= share or w.wait_share >= share


@dataclass(frozen=True)
class Change:
    """A rank became, or stopped being, a straggler of a group, judged on ``window``."""

    group: str
    rank: int
    named: bool
    window: RankWindow
    ranks: int  # in the group
    basis: str
    first_seq: int
    last_seq: int
    rows: list[ArrivalRow]

    def evidence(self) -> list[str]:
        w = self.window
        return [
            f"process group {self.group}: collectives #{self.first_seq} to #{self.last_seq}, {w.collectives} issued "
            f"by all {self.ranks} ranks over {w.span_s:.1f} s, compared on their {self.basis}",
            f"rank {self.rank} arrived last at {w.last} of them ({w.last_share:.0%}; by chance {1 / self.ranks:.0%}) "
            f"and caused {w.wait_share:.0%} of the time ranks waited for the last one",
            f"the others waited {1000 * w.cost_s:.0f} ms for it beyond the next-latest rank ({w.cost_fraction:.1%} of "
            f"their time) in {w.waits} waits, besides its longest ({1000 * w.largest_wait_s:.1f} ms)",
            *(f"#{r.seq}: " + ", ".join(f"rank {q} +{ms:.1f} ms" for q, ms in r.late_ms.items()) for r in self.rows),
        ]


@dataclass
class Rule:
    """The rule applied window after window to one job's collectives, remembering who is named."""

    window_s: float = WINDOW_S
    named: dict[str, int] = field(default_factory=dict)  # group -> its straggler

    def judge(self, collectives: list[CollectiveArrivals]) -> list[Change]:
        """The changes the newest window of ``collectives`` (every group's, oldest first) brings."""
        changes = []
        for group in sorted({c.group for c in collectives}):
            mine = [c for c in collectives if c.group == group]
            newest = mine[-1].first
            recent = [c for c in mine if c.first >= newest - self.window_s] or mine[-1:]
            if len(recent) < MIN_COLLECTIVES:
                recent = mine[-MIN_COLLECTIVES:]
            windows = window_of(recent)
            if not windows:
                continue
            n = len(windows)
            current = self.named.get(group)
            if current is not None and not is_straggler(windows[current], n, named=True):
                del self.named[group]
                changes.append(self._change(group, current, False, windows, recent))
            if group not in self.named:
                for rank, w in windows.items():
                    if is_straggler(w, n, named=False):
                        self.named[group] = rank
                        changes.append(self._change(group, rank, True, windows, recent))
                        break
        return changes

    @staticmethod
    def _change(group: str, rank: int, named: bool, windows: dict[int, RankWindow],
                recent: list[CollectiveArrivals]) -> Change:
        lasts = sorted((c for c in recent if c.last_rank == rank), key=lambda c: -c.cost)
        rows = [c.row() for c in lasts[1:EVIDENCE_ROWS + 1]]  # the costliest it was counted for: not its largest
        seqs = [c.seq for c in recent]
        return Change(group, rank, named, windows[rank], len(windows), recent[-1].basis, min(seqs), max(seqs),
                      sorted(rows, key=lambda r: r.seq))
