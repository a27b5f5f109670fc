"""The latency storm's records: what each rank measured, and the storm as reported."""

from __future__ import annotations

from dataclasses import dataclass, field

from .codec import flatten
from .compare import TimedRow
from .figures import BarChart
from .machines import GATHERED, GatheredJob, StormMachines
from .session import Distribution, Histogram, SessionRecord


@dataclass(frozen=True)
class StormSettings:
    """What every rank of a storm runs (rank side of config.StormConfig)."""

    iters: int
    bytes: int
    warmup: int
    per_op_iters: int


@dataclass(frozen=True)
class StormRankResult:
    """One rank's storm: its four passes (workloads/storm.py)."""

    mean_us: float  # pipelined: N back to back, one device sync, wall / N
    seed_method_us: float  # the report's own script: no device sync
    per_op_us: Distribution  # blocking: a device sync after each op
    per_op_histogram: Histogram
    device_us: Distribution | None  # device events per op; None on the host
    cpu_user_s: float  # this rank's own CPU time during the pipelined pass
    cpu_system_s: float
    ctx_switches: int
    storm_wall_s: float
    correct: bool  # a final all_reduce of known values summed right
    # A job on several launchers: what every rank gathered (records/machines.py); never written per rank.
    machines: GatheredJob | None = field(default=None, metadata=GATHERED, compare=False)


@dataclass(frozen=True, kw_only=True)
class StormSummary:
    """The storm over every rank (measurements/storm.py)."""

    method: str
    mean_us: float
    mean_us_max_rank: float
    seed_method_us: float
    per_op_us: Distribution
    per_op_histogram: Histogram | None = None  # the first storm reports had none
    device_us: Distribution | None = None
    mean_minus_device_us: float | None = None  # the first storm reports called it dispatch_overhead_us
    bound_by: str | None = None
    cpu_system_pct_of_wall: float
    cpu_user_pct_of_wall: float
    device_util_pct_max: int | None = None


@dataclass(frozen=True)
class StormRecord:
    """The storm as reported: the session, and (when it completed) the storm's numbers and its threshold."""

    session: SessionRecord = field(metadata=flatten())
    correct: bool
    threshold_us: float
    threshold_reason: str
    within_threshold: bool
    machines: StormMachines | None = field(default=None, metadata={"omit_none": True})  # several launchers
    summary: StormSummary | None = field(default=None, metadata=flatten())

    def timed_rows(self, config) -> list[TimedRow]:
        """The storm as one comparable row: its pipelined mean, op "storm", at the configured size."""
        if not self.session.completed or self.summary is None:
            return []
        return [TimedRow("storm", config.bytes, True, self.summary.mean_us)]

    def figures(self, stage: str) -> list:
        """The per-op latency histogram (log bins), against the threshold; across machines, the storm inside
        and between them."""
        across = self.machines.figures(stage) if self.machines else []
        if self.summary is None or self.summary.per_op_histogram is None:
            return across
        s = self.summary
        edges = s.per_op_histogram.edges_us
        labels = [f"<{edges[0]:g}"] + [f"{a:g}-{b:g}" for a, b in zip(edges, edges[1:])] + [f">{edges[-1]:g}"]
        caption = (f"{stage}: {s.per_op_us.n} ops per rank, per-op blocking latency (us, log bins); mean "
                   f"{s.mean_us:.1f} us pipelined vs threshold {self.threshold_us:.0f} us; backend "
                   f"{self.session.backend}")
        return [BarChart(f"storm-hist-{stage}", "Latency storm", caption, "latency per op (us)", "ops", labels,
                         [float(c) for c in s.per_op_histogram.counts]), *across]
