"""The pairwise test's records: what each rank tested, and every machine pair as reported, with the finding
that names the slowest pair against the others (measurements/aggregate.py states the rule)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from .codec import FLATTEN, OMIT
from .core import TimedRow
from .figures import BarChart
from .machines import GATHERED, GatheredJob, JobMachines, PairFinding, PairResult, pairs_table
from .session import SessionRecord, session_parts
from .sweep import GroupSweepRow


@dataclass(frozen=True)
class PairwiseRankResult:
    """One rank's part: the pairs it tested (none for a rank that is not its machine's lowest)."""

    pairs: list[str]
    # What every rank gathered (records/machines.py); never written per rank.
    machines: GatheredJob | None = field(default=None, metadata=GATHERED, compare=False)


@dataclass(frozen=True)
class PairwiseRecord:
    """Every machine pair: its all_reduce rows, latency and busbw, and the finding (None: the ranks did not finish)."""

    session: SessionRecord = field(metadata=FLATTEN)
    method: str
    rows: list[GroupSweepRow]  # every pair's all_reduce at every size
    pairs: list[PairResult]
    machines: JobMachines | None = field(default=None, metadata=OMIT)
    finding: PairFinding | None = field(default=None, metadata=OMIT)

    json_parts = partial(session_parts, PairwiseRankResult)  # placement, ranks' results: checked when read back

    def timed_rows(self, config=None) -> list[TimedRow]:
        """Each pair's rows as `ddplab compare` lines them up: op "all_reduce A <-> B", by size."""
        return [TimedRow(f"{g.row.op} {g.group.label}", g.row.size_bytes, True, g.row.time_us, g.row.busbw_gbps,
                         g.row.num_wrong) for g in self.rows if g.row.time_us and g.row.size_bytes]

    def figures(self, stage: str) -> list:
        out = self.machines.figures(stage) if self.machines else []
        if not self.pairs:
            return out
        out.append(pairs_table(stage, self.pairs, self.finding))
        timed = [p for p in self.pairs if p.busbw_gbps is not None]
        if timed:
            out.append(BarChart(f"pairs-busbw-{stage}", "Machine pairs",
                                f"{stage}: all_reduce busbw of each machine pair at {timed[0].busbw_size_bytes} B "
                                f"(one rank on each machine)", "machine pair", "busbw (GB/s)",
                                [p.label for p in timed], [p.busbw_gbps for p in timed]))
        return out
