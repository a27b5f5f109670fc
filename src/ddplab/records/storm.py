"""The latency storm's records: what each rank measured, and the storm as reported."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from .codec import FLATTEN, OMIT, OMIT_DEFAULT
from .core import TimedRow
from .library_engine import LIBRARY_PREFIX, TORCH, AddedCost, LibraryEngineRecord, added_cost_figures
from .figures import HistogramChart, Mark
from .machines import GATHERED, GatheredJob, StormMachines
from .session import Distribution, Histogram, SessionRecord, session_parts


@dataclass(frozen=True)
class StormSettings:
    """What every rank of a storm runs (rank side of measurements.storm.StormConfig)."""

    iters: int
    bytes: int
    warmup: int
    per_op_iters: int
    # Written only when not the default, so a storm through torch alone keeps its keys (library_engine.engine_option).
    engine: str = field(default=TORCH, metadata=OMIT_DEFAULT)  # library_engine.ENGINES
    shared_device: bool = field(default=False, metadata=OMIT_DEFAULT)  # for the library engine's communicator


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
    # --engine both: the same passes through the library engine, each right after torch's (this record is torch's)
    library: StormRankResult | None = field(default=None, metadata=OMIT)
    # A job on several launchers: what every rank gathered (records/machines.py); never written per rank.
    machines: GatheredJob | None = field(default=None, metadata=GATHERED, compare=False)


@dataclass(frozen=True, kw_only=True)
class StormSummary:
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

    session: SessionRecord = field(metadata=FLATTEN)
    correct: bool
    threshold_us: float
    threshold_reason: str
    within_threshold: bool
    machines: StormMachines | None = field(default=None, metadata=OMIT)  # several launchers
    summary: StormSummary | None = field(default=None, metadata=FLATTEN)
    # Which engine the numbers above are; with both, the library's own numbers and what torch adds per call.
    engine: str = field(default=TORCH, metadata=OMIT_DEFAULT)
    library: LibraryEngineRecord | None = field(default=None, metadata=OMIT)
    library_summary: StormSummary | None = field(default=None, metadata=OMIT)
    library_correct: bool | None = field(default=None, metadata=OMIT)
    added_cost: list[AddedCost] | None = field(default=None, metadata=OMIT)

    json_parts = partial(session_parts, StormRankResult)  # placement, ranks' results: checked when read back

    def timed_rows(self, config) -> list[TimedRow]:
        """The storm as one comparable row: its pipelined mean, op "storm", at the configured size; with both
        engines the library's beside it as "library:storm"."""
        if not self.session.completed or self.summary is None:
            return []
        rows = [TimedRow("storm", config.bytes, True, self.summary.mean_us)]
        if self.library_summary is not None:
            rows.append(TimedRow(f"{LIBRARY_PREFIX}storm", config.bytes, True, self.library_summary.mean_us))
        return rows

    def figures(self, stage: str) -> list:
        """The per-op latency histogram against the threshold; across machines, the storm inside and between them."""
        across = self.machines.figures(stage) if self.machines else []
        if self.summary is None or self.summary.per_op_histogram is None:
            return across
        s = self.summary
        counts = s.per_op_histogram.counts  # one bin below the first edge, one above the last
        caption = (f"{stage}: {s.per_op_us.n} ops per rank, one at a time (a device sync after each), log bins; "
                   f"the pipelined mean {s.mean_us:.1f} us is what the threshold ({self.threshold_us:.0f} us) "
                   f"judges; backend {self.session.backend}")
        if self.engine != TORCH:
            caption += f"; engine {self.engine}"
        marks = [Mark(f"p{k}", value, "stat") for k, value in (("50", s.per_op_us.p50), ("99", s.per_op_us.p99))
                 if value is not None]
        marks += [Mark("pipelined mean", s.mean_us, "detected"), Mark("threshold", self.threshold_us, "threshold")]
        return [HistogramChart(f"storm-hist-{stage}", "Latency storm", caption, "latency per op",
                               s.per_op_histogram.edges_us, list(counts[1:-1]), below=counts[0], above=counts[-1],
                               x_unit="us", marks=marks),
                *added_cost_figures(stage, self.added_cost or [], "latency storm, one all_reduce size"), *across]
