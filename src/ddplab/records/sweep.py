"""The sweep's records: what each rank measured, the nccl-tests row (shared with the nccl-tests importer),
the spike finding, what the launcher's sampler did, and the sweep as reported."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial

from ..errors import UsageError
from .ceiling import CopyRate
from .codec import FLATTEN, OMIT, OMIT_DEFAULT
from .compare import Spike
from .library_engine import LIBRARY_PREFIX, TORCH, AddedCost, LibraryEngineRecord, added_cost_figures
from .figures import Highlight, LineChart, Overlay, Series
from .core import TimedRow
from .machines import GATHERED, GatheredJob, Group, JobMachines
from .memory import MemoryFit, MemoryShare
from .session import SessionRecord, session_parts

# Written, null included, exactly when the row has a time (nccl-tests prints these columns for every timed row).
TIMED = {"omit_with": "time_us"}


# ---------------------------------------------------------------------------------------------- rank side

@dataclass(frozen=True)
class SweepSettings:
    """What every rank of a sweep runs: the SweepConfig, with what the launcher resolved."""

    ops: tuple[str, ...]
    sizes: tuple[int, ...]
    dtype: str
    mode: str  # pipelined | blocking
    iters: int
    warmup: int
    check: bool
    repeat: int  # resolved for the device (measurements/sweep.py default_repeat)
    ceiling_bytes: int | None = None  # rank 0 also times a device copy of this size (shared device)
    # Written only when not the default, so a sweep through torch alone keeps its keys (library_engine.engine_option).
    engine: str = field(default=TORCH, metadata=OMIT_DEFAULT)  # library_engine.ENGINES
    shared_device: bool = field(default=False, metadata=OMIT_DEFAULT)  # for the library engine's communicator
    # the ranks each rank plans memory for (None: every local rank on one device, from the environment)
    memory: MemoryShare | None = field(default=None, metadata=OMIT)


@dataclass(frozen=True)
class Repetition:
    """One nccl-tests measurement of ``iters`` ops by one rank, with its wall-clock window."""

    time_us: float
    window: tuple[float, float]  # time.time() at its barrier and after its last sync
    sampler_wait_s: float  # how long the rank waited for a device query of the sampler to end


@dataclass(frozen=True)
class SweepRankRow:
    """One (op, size, placement) on one rank; an op the world is too small for has only ``skipped``, a size the
    memory cannot hold its size, ``skipped`` and ``memory`` (workloads/memory.py)."""

    op: str
    size_bytes: int | None = field(default=None, metadata=OMIT)
    count: int | None = field(default=None, metadata=OMIT)
    in_place: bool | None = field(default=None, metadata=OMIT)
    repeats: list[Repetition] | None = field(default=None, metadata=OMIT)
    num_wrong: int | None = field(default=None, metadata=OMIT)  # None: not checked (--no-check)
    error: str | None = field(default=None, metadata=OMIT)  # the op raised: every rank alike, the sweep goes on
    skipped: str | None = field(default=None, metadata=OMIT)
    memory: MemoryFit | None = field(default=None, metadata=OMIT)  # this rank's plan, when the size was skipped
    # planned host bytes per rank (platform/memory_plan.py)
    host_need_bytes: int | None = field(default=None, metadata=OMIT)
    start_rss_bytes: int | None = field(default=None, metadata=OMIT)  # RSS when the size began (previous one freed)
    peak_rss_bytes: int | None = field(default=None, metadata=OMIT)  # peak RSS while the size ran


@dataclass(frozen=True)
class CopyCeiling(CopyRate):
    """A device copy of ``size_bytes`` (workloads/ceiling.py copy_rate): what shared-device busbw is held to."""


@dataclass(frozen=True)
class SweepRankResult:
    rows: list[SweepRankRow]
    ceiling: CopyCeiling | None  # rank 0 on a shared device, else None
    # --engine both: the library engine's row of each size, timed right after torch's (``rows`` are torch's)
    library_rows: list[SweepRankRow] | None = field(default=None, metadata=OMIT)
    # A job on several launchers: what every rank gathered (records/machines.py); never written per rank.
    machines: GatheredJob | None = field(default=None, metadata=GATHERED, compare=False)


# ---------------------------------------------------------------------------------------------- the rows

@dataclass(frozen=True)
class SweepRow:
    """One nccl-tests row: a size of one collective in one placement, timed and checked, or why not; the sweep writes
    it and measurements/nccl_tests.py reads it from nccl-tests' text."""

    op: str  # ddplab's collective name; "" when an nccl-tests table named none
    dtype: str
    size_bytes: int | None = field(default=None, metadata={**OMIT, "expect": ("a number > 0", lambda v: v > 0)})
    count: int | None = field(default=None, metadata=OMIT)
    in_place: bool | None = field(default=None, metadata=OMIT)
    time_us: float | None = field(default=None, metadata=OMIT)
    time_us_max_rank: float | None = field(default=None, metadata=OMIT)
    algbw_gbps: float | None = field(default=None, metadata=TIMED)
    busbw_gbps: float | None = field(default=None, metadata=TIMED)  # None: one rank, busbw is not defined
    num_wrong: int | None = field(default=None, metadata=TIMED)  # None: not checked
    repeat_us: list[float] | None = field(default=None, metadata=OMIT)  # each repetition, averaged over ranks
    repeat_min_us: float | None = field(default=None, metadata=OMIT)
    repeat_max_us: float | None = field(default=None, metadata=OMIT)
    repeat_sampler_queried: list[bool] | None = field(default=None, metadata=OMIT)
    busbw_fraction_of_ceiling: float | None = field(default=None, metadata=OMIT)
    error: str | None = field(default=None, metadata=OMIT)
    skipped: str | None = field(default=None, metadata=OMIT)
    # Memory (platform/memory_plan.py): the plan of a size skipped because the memory could not hold it (needed vs
    # available), and, for every size a sweep ran, the planned host bytes and the host RSS measured per rank (the
    # largest over ranks): when the size began, after the previous one was freed, and its peak.
    memory: MemoryFit | None = field(default=None, metadata=OMIT)
    host_need_bytes: int | None = field(default=None, metadata=OMIT)
    start_rss_bytes: int | None = field(default=None, metadata=OMIT)
    peak_rss_bytes: int | None = field(default=None, metadata=OMIT)

    def timed_row(self) -> TimedRow | None:
        if not self.time_us or self.size_bytes is None or self.in_place is None:
            return None
        return TimedRow(self.op, self.size_bytes, self.in_place, self.time_us, self.busbw_gbps, self.num_wrong)


@dataclass(frozen=True)
class SamplerRecord:
    """Whether the launcher's sampler ran, whether it meant to keep out of timed windows, and whether it did."""

    on: bool
    device_queries_kept_out_of_timed_windows: bool
    device_queries: int
    device_queries_skipped_while_timing: int
    repetitions: int
    repetitions_overlapped_by_a_device_query: int
    device_query_windows: list[tuple[float, float]]
    method: str


# ---------------------------------------------------------------------------------------------- across machines

@dataclass(frozen=True)
class GroupSweepRow:
    """One size of all_reduce on one group of ranks, merged as the sweep's rows are, beside the group's keys."""

    group: Group = field(metadata=FLATTEN)
    row: SweepRow = field(metadata=FLATTEN)


@dataclass(frozen=True)
class SweepMachines:
    """The sweep across machines: where every rank ran, and all_reduce again inside and between machines."""

    job: JobMachines = field(metadata=FLATTEN)
    rows: list[GroupSweepRow]
    method: str

    def figures(self, stage: str) -> list:
        series: dict[str, list[tuple[float, float]]] = {}
        for g in self.rows:
            if g.row.busbw_gbps is not None and g.row.size_bytes:
                series.setdefault(g.group.label, []).append((float(g.row.size_bytes), g.row.busbw_gbps))
        out = self.job.figures(stage)
        if series:
            out.append(LineChart(f"busbw-machines-{stage}", "Bus bandwidth inside and between machines",
                                 f"{stage}: all_reduce busbw on each group of ranks, one group at a time "
                                 f"({self.method})", "message size", "busbw (GB/s)",
                                 [Series(label, points) for label, points in series.items()], log_x=True,
                                 x_unit="bytes", y_unit="GB/s"))
        return out


# ---------------------------------------------------------------------------------------------- the sweep

@dataclass(frozen=True)
class SweepRecord:
    """The sweep as reported. Fields with defaults are the ones reports of earlier versions lack."""

    session: SessionRecord = field(metadata=FLATTEN)
    mode: str
    dtype: str
    rows: list[SweepRow]
    num_wrong_total: int
    errors: list[SweepRow]  # the rows whose op raised
    avg_busbw_gbps: float | None  # nccl-tests' footer; None when no row has a busbw (one rank)
    min_busbw_gbps: float | None  # --min-busbw
    ceiling: CopyCeiling | None  # the device copy ceiling, on a shared device
    time_method: str = ""
    repeat: int = 1
    spikes: list[Spike] | None = None  # None: a report from before spikes were looked for
    spike_rule: str = ""
    sampler: SamplerRecord | None = None
    # Which engine ``rows`` are; with both, the library's rows beside torch's and what torch adds per call.
    engine: str = field(default=TORCH, metadata=OMIT_DEFAULT)
    library: LibraryEngineRecord | None = field(default=None, metadata=OMIT)
    library_rows: list[SweepRow] | None = field(default=None, metadata=OMIT)
    added_cost: list[AddedCost] | None = field(default=None, metadata=OMIT)
    machines: SweepMachines | None = field(default=None, metadata=OMIT)  # a job on several launchers

    json_parts = partial(session_parts, SweepRankResult)  # placement, ranks' results: checked when read back

    def __post_init__(self):
        # The total is what the verdict reads: it must be the rows' own (a report read back is judged again from
        # its data, and a total edited apart from its rows would let a PASS stand beside wrong results).
        rows_wrong = sum(r.num_wrong or 0 for r in self.rows)
        if self.num_wrong_total != rows_wrong:
            raise UsageError("invalid-num-wrong-total", f"{self.num_wrong_total} is not the rows' #wrong summed "
                                                        f"({rows_wrong})")

    @property
    def host_only(self) -> bool:
        return self.session.host_only

    @property
    def bandwidth_rows(self) -> list[SweepRow]:
        """The rows with a bus bandwidth (every timed row, unless the world is one rank)."""
        return [r for r in self.rows if r.busbw_gbps is not None]

    def timed_rows(self, config=None) -> list[TimedRow]:
        """Every timed row, by its collective's name, so nccl-tests output lines up with it (whichever engine
        timed it); with both engines the library's rows beside them as "library:<collective>"."""
        rows = [t for t in (r.timed_row() for r in self.rows) if t is not None]
        library = [t for t in (r.timed_row() for r in self.library_rows or []) if t is not None]
        return rows + [replace(t, op=LIBRARY_PREFIX + t.op) for t in library]

    def figures(self, stage: str) -> list[LineChart]:
        """Per collective, the two plots nccl-tests' numbers are read from: time against size (log-log) and busbw (algbw
        at one rank) against size, out-of-place and in-place, spikes ringed, the copy ceiling where the ranks share a
        device; each offers a baseline overlay under the op `compare` gives it."""
        timed = [r for r in self.rows if r.size_bytes and r.time_us]
        if not timed:
            return []
        bus = any(r.busbw_gbps is not None for r in timed)
        spiked = {s.key: s for s in self.spikes or []}
        caption = (f"{stage}: {self.session.world_size} ranks, backend {self.session.backend}, time {self.mode}, "
                   f"dtype {self.dtype}")
        if self.engine != TORCH:
            caption += f"; engine {self.engine}" + (" (lines: the torch engine's rows)" if self.library_rows else "")
        out: list = []
        for op in dict.fromkeys(r.op for r in timed):
            rows = [r for r in timed if r.op == op]
            compare_op = op if stage == "sweep" else f"{stage}:{op}"
            times = [Series("in-place" if place else "out-of-place",
                            [(float(r.size_bytes), r.time_us) for r in rows if r.in_place is place])
                     for place in (False, True) if any(r.in_place is place for r in rows)]
            rates = [Series(s.label, [(float(r.size_bytes), (r.busbw_gbps if bus else r.algbw_gbps) or 0.0)
                                      for r in rows if r.in_place is (s.label == "in-place")]) for s in times]
            spikes = [r for r in rows if (r.op, r.size_bytes, bool(r.in_place)) in spiked]
            time_marks = [Highlight(f"spike: {spiked[(r.op, r.size_bytes, bool(r.in_place))].factor:.1f}x its "
                                    f"neighbours", float(r.size_bytes), r.time_us) for r in spikes]
            rate_marks = [Highlight(m.label, m.x, (r.busbw_gbps if bus else r.algbw_gbps) or 0.0)
                          for m, r in zip(time_marks, spikes)]
            out.append(LineChart(f"time-{stage}-{op}", f"{op}: time and bus bandwidth vs message size",
                                 f"{caption}; time per op", "message size", "time per op", times, log_x=True,
                                 log_y=True, x_unit="bytes", y_unit="us", highlights=time_marks,
                                 overlay=Overlay(compare_op, op, "time_us")))
            out.append(LineChart(f"busbw-{stage}-{op}", f"{op}: time and bus bandwidth vs message size",
                                 caption + ("; dashed red: device copy ceiling (ddplab ceiling method)"
                                            if self.ceiling else ""), "message size",
                                 f"{'busbw' if bus else 'algbw'} (GB/s, GB = 1e9)", rates, log_x=True,
                                 reference_line=("copy ceiling", self.ceiling.gbps) if self.ceiling else None,
                                 x_unit="bytes", y_unit="GB/s", highlights=rate_marks,
                                 overlay=Overlay(compare_op, op, "busbw_gbps") if bus else None))
        return [*out, *added_cost_figures(stage, self.added_cost or [], f"every size, time {self.mode}"),
                *(self.machines.figures(stage) if self.machines else [])]
