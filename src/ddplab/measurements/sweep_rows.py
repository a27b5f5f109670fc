"""The sweep's rows over every rank: each (op, size, placement) from every rank's row for it, its time averaged
over ranks (nccl-tests -a 1) per repetition, the median repetition reported with the spread, wrong elements
summed, algbw and busbw derived from the median (measurements/sweep.py runs the sweep)."""

from __future__ import annotations

from dataclasses import dataclass

from .. import collectives
from ..supervision import timed_windows
from ..records.sweep import SweepRankRow, SweepRow


def merge_rows(per_rank_rows: list[list[SweepRankRow]], n: int, dtype: str,
               device_queries: list[tuple[float, float]] = ()) -> list[SweepRow]:
    return [merge_row(same, n, dtype, device_queries) for same in zip(*per_rank_rows)]


def merge_row(same: tuple[SweepRankRow, ...], n: int, dtype: str, device_queries=()) -> SweepRow:
    """One (op, size, placement) from every rank's row for it."""
    first = same[0]
    if first.skipped is not None and first.size_bytes is None:  # an op the world is too small for
        return SweepRow(op=first.op, dtype=dtype, skipped=first.skipped)
    placed = dict(op=first.op, dtype=dtype, size_bytes=first.size_bytes, count=first.count, in_place=first.in_place,
                  **memory_measured(same))
    if first.skipped is not None:  # the memory could not hold it: the plan of a rank that found too little
        short = next((r for r in same if r.memory is not None and not r.memory.fits), first)
        return SweepRow(**placed, skipped=short.skipped, memory=short.memory)
    errors = [r.error for r in same if r.error]
    if errors:
        return SweepRow(**placed, error=errors[0])
    spec = collectives.get(first.op)
    repetitions = merge_repetitions([r.repeats for r in same], device_queries)
    median = median_repetition(repetitions)
    algbw = spec.algbw_gbps(first.count, first.size_bytes // first.count, median.time_us)
    wrong = [r.num_wrong for r in same]
    times = [x.time_us for x in repetitions]
    return SweepRow(**placed, time_us=median.time_us, time_us_max_rank=median.time_us_max_rank, algbw_gbps=algbw,
                    busbw_gbps=spec.busbw_gbps(algbw, n),
                    num_wrong=None if any(w is None for w in wrong) else sum(wrong),
                    repeat_us=times, repeat_min_us=min(times), repeat_max_us=max(times),
                    repeat_sampler_queried=[x.sampler_queried for x in repetitions])


def memory_measured(same: tuple[SweepRankRow, ...]) -> dict:
    """The planned host bytes per rank and the host RSS at the size's start and its peak, the largest over ranks
    (rows of reports from before memory planning have none)."""
    def largest(values):
        known = [v for v in values if v is not None]
        return max(known) if known else None

    return dict(host_need_bytes=largest(r.host_need_bytes for r in same),
                start_rss_bytes=largest(r.start_rss_bytes for r in same),
                peak_rss_bytes=largest(r.peak_rss_bytes for r in same))


@dataclass(frozen=True)
class MergedRepetition:
    """One repetition over every rank: mean time, the slowest rank, whether a sampler query overlapped it."""

    time_us: float
    time_us_max_rank: float
    sampler_queried: bool


def merge_repetitions(per_rank, device_queries=()) -> list[MergedRepetition]:
    """One entry per repetition (``per_rank``: each rank's list of records.sweep.Repetition)."""
    out = []
    for reps in zip(*per_rank):
        times = [r.time_us for r in reps]
        out.append(MergedRepetition(sum(times) / len(times), max(times),
                                    any(timed_windows.overlaps(r.window, device_queries) for r in reps)))
    return out


def median_repetition(repetitions: list[MergedRepetition]) -> MergedRepetition:
    """The median repetition by time (the lower middle for an even count): always one that was measured."""
    ordered = sorted(repetitions, key=lambda x: x.time_us)
    return ordered[(len(ordered) - 1) // 2]
