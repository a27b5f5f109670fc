"""A baseline beside a report's own lines: another ddplab run or nccl-tests output, read as `ddplab compare`
reads it (comparison.load_input), drawn dashed on the charts that offer an ``Overlay`` (records/figures.py).

A chart names the op as `compare` names it in its report ("sweep-shared:all_reduce" for a lab stage whose name
is not its command) and the bare op ("all_reduce"): a baseline of the same kind of report lines up stage by
stage; nccl-tests output, which knows no stages, lines up by the bare op.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .records.compare import TimedRow
from .records.figures import LineChart, Series


@dataclass(frozen=True)
class Baseline:
    label: str  # e.g. "nccl-tests all_reduce_perf.txt"
    rows: list[TimedRow]


def load_baseline(path: str) -> Baseline:
    """The file as `compare` reads its A side (UsageError, exit 2, naming the file when it is neither)."""
    from .comparison import load_input

    found = load_input(path)
    return Baseline(found.label, found.rows)


def overlay(figures: list, baseline: Baseline | None) -> tuple[list, int]:
    """The figures with the baseline's lines added where they have its op; and how many charts got one."""
    if baseline is None:
        return figures, 0
    out, drawn = [], 0
    for f in figures:
        series = _series_for(f, baseline) if isinstance(f, LineChart) and f.overlay else []
        if series:
            f, drawn = replace(f, series=[*f.series, *series]), drawn + 1
        out.append(f)
    return out, drawn


def _series_for(chart: LineChart, baseline: Baseline) -> list[Series]:
    wanted = chart.overlay
    rows = [r for r in baseline.rows if r.op == wanted.op] or [r for r in baseline.rows if r.op == wanted.bare_op]
    out = []
    for in_place in (False, True):
        points = sorted((float(r.size_bytes), value) for r in rows if r.in_place is in_place and r.size_bytes
                        for value in [getattr(r, wanted.value)] if value)
        if points:
            out.append(Series(f"baseline {'in' if in_place else 'out'}", points, baseline=True))
    return out
