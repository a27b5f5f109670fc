"""Terminal tables for a job across machines, shared by train, storm, sweep and pairwise: every rank and
its machine, the measurement repeated inside and between machines, the machine pairs (records/machines.py)."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from ..records.machines import JobMachines, PairFinding, PairResult, StormMachines
from ..records.sweep import SweepMachines


def ranks_table(job: JobMachines) -> Table:
    """Every rank of the job, from every machine (each launcher's own ranks are in the "Ranks" table)."""
    table = Table(title=f"Every rank of the job: {len(job.ranks)} on {len(job.machines)} machine(s)",
                  title_justify="left")
    for col in ("rank", "local rank", "machine", "hostname"):
        table.add_column(col, justify="right" if "rank" in col else "left")
    for p in job.ranks:
        table.add_row(str(p.rank), str(p.local_rank), escape(p.machine), escape(p.hostname))
    return table


def storm_tables(machines: StormMachines) -> list[Table]:
    """Every rank, then the groups' latency (a job on one machine has no groups)."""
    return [ranks_table(machines.job), *([latency_table(machines)] if machines.latency else [])]


def sweep_tables(machines: SweepMachines) -> list[Table]:
    """Every rank, then the groups' busbw (a job on one machine has no groups)."""
    return [ranks_table(machines.job), *([busbw_table(machines)] if machines.rows else [])]


def latency_table(machines: StormMachines) -> Table:
    table = Table(title="Latency inside and between machines (each group alone)", title_justify="left")
    for col in ("group", "ranks", "mean (us)", "slowest rank (us)"):
        table.add_column(col, justify="left" if col == "group" else "right")
    for g in machines.latency:
        table.add_row(escape(g.group.label), _ranks(g.group.ranks), f"{g.mean_us:.2f}", f"{g.mean_us_max_rank:.2f}")
    return table


def busbw_table(machines: SweepMachines) -> Table:
    """all_reduce busbw by size, one column per group of ranks."""
    groups = list(dict.fromkeys(g.group.label for g in machines.rows))
    table = Table(title="all_reduce busbw inside and between machines (GB/s, each group alone)",
                  title_justify="left")
    table.add_column("size (B)", justify="right")
    for label in groups:
        table.add_column(escape(label), justify="right")
    cells: dict[int, dict[str, str]] = {}
    for g in machines.rows:
        row = g.row
        text = ("ERROR" if row.error else "n/a" if row.busbw_gbps is None else f"{row.busbw_gbps:.3f}")
        if row.num_wrong:
            text += f" ({row.num_wrong} wrong)"
        cells.setdefault(row.size_bytes, {})[g.group.label] = text
    for size in sorted(cells):
        table.add_row(str(size), *(cells[size].get(label, "") for label in groups))
    return table


def pairs_table(pairs: list[PairResult], finding: PairFinding | None) -> Table:
    slow, broken = (set(finding.slow), set(finding.broken)) if finding else (set(), set())
    table = Table(title="Machine pairs (one rank on each)", title_justify="left")
    for col in ("pair", "round", "ranks", "latency", "busbw", "finding"):
        table.add_column(col, justify="left" if col in ("pair", "finding") else "right")
    for p in pairs:
        word = (f"broken: {p.why_broken}" if p.label in broken else "slow" if p.label in slow else "ok")
        table.add_row(escape(p.label), str(p.round + 1), _ranks([p.rank_a, p.rank_b]),
                      "n/a" if p.latency_us is None else f"{p.latency_us:.1f} us @ {p.latency_size_bytes} B",
                      "n/a" if p.busbw_gbps is None else f"{p.busbw_gbps:.3f} GB/s @ {p.busbw_size_bytes} B",
                      escape(word))
    return table


def _ranks(ranks: list[int]) -> str:
    return ",".join(str(r) for r in ranks)
