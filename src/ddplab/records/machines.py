"""A job across machines, as its reports show it: every rank and its machine, the groups of ranks a measurement
was repeated on, and the findings about machine pairs (docs/metrics.md, "Across machines").

Each launcher gets only its own ranks back from elastic, so the ranks gather from each other before they end and
every machine's report carries every rank. A machine is named by its address toward the endpoint where known
(network namespaces and containers may share one hostname), else by its hostname. The rank side's ``GatheredJob`` is
never written per rank (``skip``): the launcher turns it into the records below, once per report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .codec import FLATTEN, OMIT, SKIP
from .figures import BarChart, Table

# The scopes a group of ranks can have (cluster/topology.py makes them).
WHOLE_JOB = "whole job"
INTRA = "intra-machine"
INTER = "inter-machine"
PAIR = "machine pair"
# A rank-side field the launcher reads from memory and never writes per rank (see the module's docstring).
GATHERED = SKIP


@dataclass(frozen=True)
class RankPlace:
    rank: int
    local_rank: int
    machine: str  # the address toward the endpoint, else the hostname
    hostname: str


@dataclass(frozen=True)
class Group:
    """Ranks a measurement was repeated on, and what they span."""

    scope: str  # WHOLE_JOB | INTRA | INTER | PAIR
    machines: list[str]
    ranks: list[int]

    @property
    def label(self) -> str:
        if self.scope == INTRA:
            return f"{INTRA} {self.machines[0]}"
        if self.scope == PAIR:
            return " <-> ".join(self.machines)
        return f"{self.scope} ({len(self.machines)} machines)"


# ---------------------------------------------------------------------------------------------- rank side

@dataclass(frozen=True)
class GroupResult:
    """What one rank measured as a member of one group (``group`` indexes ``GatheredJob.groups``): a storm's
    pipelined mean (float), or a sweep's rows (list of records.sweep.SweepRankRow)."""

    group: int
    rank: int
    result: Any


@dataclass(frozen=True)
class GatheredJob:
    """What every rank learned from all the others before the job ended (identical on every rank)."""

    places: list[RankPlace]
    groups: list[Group] = field(default_factory=list)
    results: list[GroupResult] = field(default_factory=list)
    rounds: list[list[int]] = field(default_factory=list)  # the groups run at the same time (pairwise rounds)

    def results_of(self, group: int) -> list[GroupResult]:
        return sorted((r for r in self.results if r.group == group), key=lambda r: r.rank)


# ---------------------------------------------------------------------------------------------- reports

@dataclass(frozen=True)
class JobMachines:
    """Every rank of the job and its machine, as each machine's report carries it."""

    ranks: list[RankPlace]
    machines: dict[str, list[int]]  # machine -> its ranks, machines in node order

    def figures(self, stage: str) -> list[Table]:
        rows = [[str(p.rank), str(p.local_rank), p.machine, p.hostname] for p in self.ranks]
        return [Table(f"machines-{stage}", "Ranks and machines",
                      f"{stage}: {len(self.ranks)} ranks on {len(self.machines)} machine(s); a machine is named by "
                      f"its address toward the rendezvous endpoint", ["rank", "local rank", "machine", "hostname"],
                      rows)]


@dataclass(frozen=True)
class GroupLatency:
    """The storm's pipelined mean on one group of ranks (every member's mean, averaged)."""

    group: Group = field(metadata=FLATTEN)
    bytes: int
    mean_us: float
    mean_us_max_rank: float


@dataclass(frozen=True)
class StormMachines:
    """The storm across machines: where every rank ran, and the storm again inside and between machines."""

    job: JobMachines = field(metadata=FLATTEN)
    latency: list[GroupLatency]
    method: str

    def figures(self, stage: str) -> list:
        out = self.job.figures(stage)
        if self.latency:
            out.append(BarChart(f"storm-machines-{stage}", "Latency inside and between machines",
                                f"{stage}: pipelined mean all_reduce latency of {self.latency[0].bytes} B on each "
                                f"group of ranks, one group at a time ({self.method})", "group of ranks",
                                "mean latency (us)", [g.group.label for g in self.latency],
                                [g.mean_us for g in self.latency]))
        return out


@dataclass(frozen=True)
class PairResult:
    """One machine pair, tested by one rank on each (their lowest), in its round."""

    machine_a: str
    machine_b: str
    rank_a: int
    rank_b: int
    round: int
    latency_us: float | None  # the all_reduce time at the smallest size
    latency_size_bytes: int | None
    busbw_gbps: float | None  # at the largest size
    busbw_size_bytes: int | None
    num_wrong: int | None = field(default=None, metadata=OMIT)
    error: str | None = field(default=None, metadata=OMIT)

    @property
    def label(self) -> str:
        return f"{self.machine_a} <-> {self.machine_b}"

    @property
    def broken(self) -> bool:
        return bool(self.why_broken)

    @property
    def why_broken(self) -> str:
        """Why this pair cannot be trusted, in words; "" when it can."""
        if self.error:
            return self.error
        if self.num_wrong:
            return f"{self.num_wrong} wrong element(s)"
        return "" if self.busbw_gbps is not None else "not timed"


@dataclass(frozen=True)
class PairFinding:
    """The slowest machine pair against the others, by a rule the report states."""

    rule: str
    slowest: str | None  # the pair with the lowest busbw (None: no pair was timed)
    slow: list[str]  # pairs the rule flags
    broken: list[str]  # pairs whose all_reduce raised or gave wrong data
    suspects: list[str]  # machines in every flagged pair while some pair without them is fine
    note: str = ""  # e.g. "one pair: nothing to compare it with"

    @property
    def flagged(self) -> bool:
        return bool(self.slow or self.broken)


def pairs_table(stage: str, pairs: list[PairResult], finding: PairFinding | None) -> Table:
    """The pairs as the HTML report lists them, each with the finding's word on it."""
    slow, broken = (set(finding.slow), set(finding.broken)) if finding else (set(), set())
    rows = [[p.label, str(p.round + 1), _number(p.latency_us, "us"), _number(p.busbw_gbps, "GB/s"),
             "broken" if p.label in broken else "slow" if p.label in slow else "ok"] for p in pairs]
    caption = f"{stage}: each pair of machines, one rank on each"
    if finding is not None:
        caption += f"; {finding.rule}"
    return Table(f"pairs-{stage}", "Machine pairs", caption,
                 ["pair", "round", "latency (smallest size)", "busbw (largest size)", "finding"], rows)


def _number(value: float | None, unit: str) -> str:
    return "n/a" if value is None else f"{value:.2f} {unit}"
