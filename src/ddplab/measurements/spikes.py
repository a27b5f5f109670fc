"""A size far off its neighbours: one sweep row much slower than the sizes either side of it, a finding to explain,
never a number to average away (docs/metrics.md). Per (op, placement) series ordered by size:

- a size is a spike when its time is more than FACTOR x the time of BOTH neighbours;
- the smallest size is compared with its larger neighbour alone;
- the largest size with its smaller neighbour scaled up by the size ratio: a bandwidth-bound time grows with size,
  so with -f 4 the last size of a smooth curve takes 4x its neighbour and must not be flagged.

Inside the curve no scaling is needed: a smooth curve never takes longer than its larger neighbour.
A spike is judged as any finding is (checks.finding_verdict): WARN on an accelerator; informational on the host
CPU, where gloo on shared cores is disturbed by whatever else the machine runs.
"""

from __future__ import annotations

from typing import Iterable, Protocol

from ..records.compare import Neighbour, Spike

FACTOR = 2.0
FINDING = "a size far off its neighbours is a finding to explain"
RULE = (f"more than {FACTOR:g}x the time of both neighbours (same op and placement); the largest size against its "
        f"smaller neighbour scaled by the size ratio")


class SizedTiming(Protocol):
    """A row with a time at a size: a records.sweep.SweepRow or a records.compare.TimedRow."""

    op: str
    size_bytes: int | None
    in_place: bool | None
    time_us: float | None


def find_spikes(rows: Iterable[SizedTiming]) -> list[Spike]:
    """Rows without a time (skipped, failed, N/A) are ignored."""
    spikes = []
    for series in _series(rows).values():
        for i, row in enumerate(series):
            bounds = _neighbour_bounds(series, i)
            if not bounds:
                continue
            ratio = min(row.time_us / expected for _, expected in bounds)
            if ratio > FACTOR:
                spikes.append(Spike(op=row.op, size_bytes=row.size_bytes, in_place=row.in_place, time_us=row.time_us,
                                    neighbours=[Neighbour(n.size_bytes, n.time_us) for n, _ in bounds],
                                    factor=round(ratio, 2)))
    return spikes


def _series(rows: Iterable[SizedTiming]) -> dict[tuple, list[SizedTiming]]:
    out: dict[tuple, list[SizedTiming]] = {}
    for row in rows:
        if row.time_us and row.size_bytes is not None:
            out.setdefault((row.op, row.in_place), []).append(row)
    return {key: sorted(series, key=lambda r: r.size_bytes) for key, series in out.items()}


def _neighbour_bounds(series: list[SizedTiming], i: int) -> list[tuple[SizedTiming, float]]:
    """(neighbour, the longest time it makes plausible for size i) for each neighbour."""
    row, bounds = series[i], []
    if i > 0:
        smaller = series[i - 1]
        scale = row.size_bytes / smaller.size_bytes if i == len(series) - 1 else 1.0  # the largest size
        bounds.append((smaller, smaller.time_us * scale))
    if i < len(series) - 1:
        bounds.append((series[i + 1], series[i + 1].time_us))
    return bounds
