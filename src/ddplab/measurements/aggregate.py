"""Reports across machines, launcher side: what the ranks gathered becomes the records every machine's report
carries (records/machines.py), and the rules that judge them: every rank and its machine; the storm and all_reduce
on groups of ranks (the whole job, each machine alone, one rank per machine), merged as the measurement's own; and
machine pairs.

What is slow is judged by one rule (checks.slow_ones); a broken pair or wrong data fails everywhere.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from ..records import Check, Verdict
from .checks import SLOW_FACTOR, machines_alike, slow_ones
from ..records.machines import INTRA, GatheredJob, Group, GroupLatency, JobMachines, PairFinding, PairResult, \
    StormMachines

if TYPE_CHECKING:  # a sweep's records: imported where a sweep's are built, so that judging a storm needs none
    from ..records.sweep import GroupSweepRow, SweepMachines, SweepRankRow, SweepRow

GROUPS_METHOD = ("after the whole-job measurement, the same one on each group of ranks, one group at a time "
                 "while the other ranks wait: the whole job, each machine alone, one rank per machine (its lowest)")
STORM_METHOD = f"{GROUPS_METHOD}; pipelined mean over the storm's iterations, averaged over the group's ranks"
SWEEP_METHOD = (f"{GROUPS_METHOD}; all_reduce at the sweep's sizes, timed and checked as the sweep's rows, "
                f"busbw with the group's size")
PAIR_RULE = (f"a pair is slow when its busbw at the largest size is below 1/{SLOW_FACTOR:g} of the median of the "
             f"other pairs', or its all_reduce time at the smallest size above {SLOW_FACTOR:g}x theirs; broken when "
             f"its all_reduce raised or gave wrong data; a machine in every flagged pair, while a pair without it is "
             f"fine, is the suspect")

Merge = Callable[[tuple["SweepRankRow", ...], int], "SweepRow"]  # (each member's row for one size, group size) -> row


def gathered(results: Iterable) -> GatheredJob | None:
    """What the ranks gathered, from the first rank result that carries it (every rank's is the same)."""
    return next((r.machines for r in results if getattr(r, "machines", None) is not None), None)


def job_machines(job: GatheredJob) -> JobMachines:
    from ..cluster import topology

    return JobMachines(job.places, topology.machines({p.rank: p.machine for p in job.places}))


# ---------------------------------------------------------------------------------------------- storm

def storm_machines(results: Iterable, size_bytes: int) -> StormMachines | None:
    job = gathered(results)
    if job is None:
        return None
    latency = []
    for index, group in enumerate(job.groups):
        means = [r.result for r in job.results_of(index)]
        if means:
            latency.append(GroupLatency(group, size_bytes, statistics.fmean(means), max(means)))
    return StormMachines(job_machines(job), latency, STORM_METHOD)


# ---------------------------------------------------------------------------------------------- sweep

def group_rows(job: GatheredJob, merge: Merge) -> list[tuple[int, GroupSweepRow]]:
    """Each group's rows, merged over its members (group index, row), groups in the order they ran."""
    from ..records.sweep import GroupSweepRow

    out = []
    for index, group in enumerate(job.groups):
        per_rank = [r.result for r in job.results_of(index)]
        out += [(index, GroupSweepRow(group, merge(same, len(group.ranks)))) for same in zip(*per_rank)]
    return out


def sweep_machines(results: Iterable, merge: Merge) -> SweepMachines | None:
    from ..records.sweep import SweepMachines

    job = gathered(results)
    if job is None:
        return None
    return SweepMachines(job_machines(job), [row for _, row in group_rows(job, merge)], SWEEP_METHOD)


def sweep_checks(machines: SweepMachines | None, host_only: bool) -> list[Check]:
    if machines is None or not machines.rows:
        return []
    rows = [correct_on_every_group(machines.rows)]
    peaks = peak_busbw(machines.rows)
    if peaks:
        rows.append(Check("bus bandwidth inside and between machines", Verdict.INFO,
                          "; ".join(f"{label} {gbps:.2f} GB/s" for label, gbps in peaks.items()),
                          "informational", f"peak all_reduce busbw per group: {machines.method}", "none"))
    inside = {g.group.machines[0]: peaks[g.group.label] for g in machines.rows
              if g.group.scope == INTRA and g.group.label in peaks}
    if len(inside) >= 2:
        rows.append(machines_alike("bus bandwidth inside each machine", inside, "GB/s", False, host_only))
    return rows


def correct_on_every_group(rows: Sequence[GroupSweepRow]) -> Check:
    wrong = sum(g.row.num_wrong or 0 for g in rows)
    errors = [g for g in rows if g.row.error]
    bad = sorted({g.group.label for g in rows if g.row.num_wrong or g.row.error})
    ok = not wrong and not errors
    return Check("all_reduce correct on every group of ranks", Verdict.PASS if ok else Verdict.FAIL,
                 f"#wrong {wrong}, errors {len(errors)}" + (f" ({', '.join(bad)})" if bad else ""), "0",
                 "every size on every group gave exact data",
                 "none" if ok else "the groups named are where data went wrong: test them alone "
                                   "(`ddplab pairwise` for machine pairs)")


def peak_busbw(rows: Sequence[GroupSweepRow]) -> dict[str, float]:
    """Each group's best busbw, groups in the order they ran."""
    peaks: dict[str, float] = {}
    for g in rows:
        if g.row.busbw_gbps is not None:
            peaks[g.group.label] = max(peaks.get(g.group.label, 0.0), g.row.busbw_gbps)
    return peaks


# ---------------------------------------------------------------------------------------------- pairs

def pair_results(job: GatheredJob, merge: Merge) -> tuple[list[GroupSweepRow], list[PairResult]]:
    """Every pair's rows, and each pair summed up: its time at the smallest size, its busbw at the largest."""
    round_of = {index: number for number, indices in enumerate(job.rounds) for index in indices}
    by_group: dict[int, list[SweepRow]] = {}
    rows = []
    for index, row in group_rows(job, merge):
        by_group.setdefault(index, []).append(row.row)
        rows.append(row)
    pairs = [_pair(group, round_of.get(index, 0), by_group.get(index, []))
             for index, group in enumerate(job.groups)]
    return rows, pairs


def _pair(group: Group, round_: int, rows: list[SweepRow]) -> PairResult:
    timed = sorted((r for r in rows if r.time_us is not None and r.size_bytes), key=lambda r: r.size_bytes)
    smallest, largest = (timed[0], timed[-1]) if timed else (None, None)
    wrong = [r.num_wrong for r in rows if r.num_wrong is not None]
    return PairResult(group.machines[0], group.machines[1], group.ranks[0], group.ranks[1], round_,
                      latency_us=smallest.time_us if smallest else None,
                      latency_size_bytes=smallest.size_bytes if smallest else None,
                      busbw_gbps=largest.busbw_gbps if largest else None,
                      busbw_size_bytes=largest.size_bytes if largest else None,
                      num_wrong=sum(wrong) if wrong else None,
                      error=next((r.error for r in rows if r.error), None if rows else "no row was measured"))


def judge_pairs(pairs: Sequence[PairResult]) -> PairFinding:
    """The slowest pair, the pairs the rule flags, and the machines every flagged pair shares."""
    broken = [p.label for p in pairs if p.broken]
    timed = [p for p in pairs if not p.broken]
    slowest = min(timed, key=lambda p: (p.busbw_gbps, -(p.latency_us or 0))).label if timed else None
    slow = sorted(set(slow_ones({p.label: p.busbw_gbps for p in timed}, higher_is_worse=False))
                  | set(slow_ones({p.label: p.latency_us for p in timed if p.latency_us is not None},
                                  higher_is_worse=True)), key=[p.label for p in timed].index)
    note = ("no machine pair: the job is on one machine" if not pairs
            else "one pair: nothing to compare it with" if len(timed) == 1 and not broken else "")
    return PairFinding(PAIR_RULE, slowest, slow, broken, suspects(pairs, set(slow) | set(broken)), note)


def suspects(pairs: Sequence[PairResult], flagged: set[str]) -> list[str]:
    """Machines whose pairs are exactly the flagged ones, where some pair without them was fine."""
    if not flagged:
        return []
    machines = list(dict.fromkeys(m for p in pairs for m in (p.machine_a, p.machine_b)))
    out = []
    for m in machines:
        mine = {p.label for p in pairs if m in (p.machine_a, p.machine_b)}
        others = {p.label for p in pairs} - mine
        if mine == flagged and others - flagged:
            out.append(m)
    return out
