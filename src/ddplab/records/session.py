"""What one multi-rank run produced, as every measurement reports it: placement, each rank's outcome, the sampler's
time series, the hang and the culprit, and how the launch ended. ``SessionRecord`` is flattened into each
measurement's ``results``, so its keys sit beside the measurement's own.

The parts a session cannot type itself (the placement and its sharing daemon's account: ``report_parts``; each rank's
workload result: ``session_parts``) are named here, so that a report read back checks them as strictly as the rest.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from .codec import FLATTEN, OMIT, SKIP
from .figures import LineChart, Series
from .placement import Placement
from .supervision import Culprit, Hang, MachineLoss, RankState

__all__ = ["Culprit", "Distribution", "FailureRecord", "Hang", "Histogram", "Listened", "MachineLoss",
           "MemorySeries", "RankOutcome", "RankReturn", "RankSample", "RankState", "Sample", "SamplerPeaks",
           "SessionRecord", "SharingDaemonPart", "SocketPin", "Timeseries", "report_parts", "session_parts"]


# Where a run listened, its store and the ranks' sockets (cluster/exposure.py decides it, docs/exposure.md says why):
# one shape for `env` (where a run would listen), every lab command's session, and `ddplab launch`.

@dataclass(frozen=True)
class SocketPin:
    """One collective library's socket-interface variable as the ranks see it."""

    variable: str
    value: str
    set_by: str  # "ddplab" (pinned by ddplab) or "user" (left as the user set it)
    loopback: bool


@dataclass(frozen=True)
class Listened:
    """The store's address and the sockets' pins, and whether the run is reachable from the network."""

    loopback_only: bool
    single_machine: bool
    store: str  # where the store listens, in words
    sockets: list[SocketPin]
    why_not: list[str]  # why loopback only cannot be claimed
    summary: str
    address: str | None = None  # the one address the store listens on or is reached at; None: every interface
    port: int | None = None  # the store's port (0: a free one, not known yet); None in `env` reports before it
    across_machines: Any = None  # ddplab's own store across machines (cluster/endpoint.StorePlan.to_dict())


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100): always a value that was measured."""
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[k]


@dataclass(frozen=True)
class Distribution:
    """Nearest-rank percentiles: each one a value that was measured. ``n`` 0: nothing was measured."""

    n: int
    min: float | None = field(default=None, metadata=OMIT)
    p50: float | None = field(default=None, metadata=OMIT)
    p90: float | None = field(default=None, metadata=OMIT)
    p99: float | None = field(default=None, metadata=OMIT)
    max: float | None = field(default=None, metadata=OMIT)
    mean: float | None = field(default=None, metadata=OMIT)

    @classmethod
    def of(cls, values: list[float]) -> "Distribution":
        if not values:
            return cls(0)
        return cls(len(values), min(values), percentile(values, 50), percentile(values, 90),
                   percentile(values, 99), max(values), statistics.fmean(values))

    @classmethod
    def worst_of(cls, dists: list["Distribution"]) -> "Distribution":
        """Each percentile's worst value over ranks (nccl-tests -I takes the max rank per iteration too)."""
        measured = [d for d in dists if d.n]
        if not measured:
            return cls(0)
        return cls(measured[0].n, *(max(getattr(d, k) for d in measured)
                                    for k in ("min", "p50", "p90", "p99", "max", "mean")))


@dataclass(frozen=True)
class Histogram:
    """Counts per latency bin: edges in us, the last bin open-ended."""

    edges_us: list[float]
    counts: list[int]


@dataclass(frozen=True)
class RankSample:
    rank: int
    pid: int
    cpu_user_s: float
    cpu_system_s: float
    ctx_switches: int
    rss_bytes: int
    device_mem_bytes: int | None = None
    device_util_pct: int | None = None


@dataclass(frozen=True)
class Sample:
    t_s: float
    ranks: list[RankSample]
    device_used_bytes: dict[int, int] = field(default_factory=dict)
    device_util_pct: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class MemorySeries:
    what: str  # "device memory", or "host RSS" where no rank's device memory was sampled
    by_rank: dict[int, list[tuple[float, int]]]  # rank -> (seconds since the launch, bytes)


@dataclass(frozen=True, kw_only=True)
class Timeseries:
    """The sampler's readings, every ``interval_s`` in the launcher (supervision/sampler.py)."""

    enabled: bool = True
    interval_s: float
    method: str
    samples: list[Sample] = field(default_factory=list)
    device_queries_kept_out_of_timed_windows: bool = False
    device_queries: int = 0
    device_queries_skipped_while_timing: int = 0
    # Wall time of the first sample's clock (t_s = 0): where a fault and its detection fall on the charts.
    started_at: float | None = field(default=None, metadata=OMIT)

    def memory(self) -> MemorySeries:
        device = any(r.device_mem_bytes for s in self.samples for r in s.ranks)
        by_rank: dict[int, list[tuple[float, int]]] = {}
        for sample in self.samples:
            for r in sample.ranks:
                value = r.device_mem_bytes if device else r.rss_bytes
                if value is not None:
                    by_rank.setdefault(r.rank, []).append((sample.t_s, value))
        return MemorySeries("device memory" if device else "host RSS", by_rank)

    def cpu_seconds(self) -> dict[int, list[tuple[float, float]]]:
        by_rank: dict[int, list[tuple[float, float]]] = {}
        for sample in self.samples:
            for r in sample.ranks:
                by_rank.setdefault(r.rank, []).append((sample.t_s, round(r.cpu_user_s + r.cpu_system_s, 3)))
        return by_rank

    def memory_chart(self, stage: str) -> list[LineChart]:
        """Each rank's memory over the run, as the sampler saw it (nothing to draw: no chart)."""
        memory = self.memory()
        return self._chart("memory-over-time", "Per-rank memory over time", stage, memory.what, memory.by_rank,
                           y_divisor=2**20, y_unit="MiB")

    def cpu_chart(self, stage: str) -> list[LineChart]:
        """Each rank's host CPU time over the run: a flat line is a rank that stopped computing."""
        return self._chart("cpu-over-time", "Per-rank CPU time", stage, "CPU time used, user + system",
                           self.cpu_seconds(), y_unit="s")

    def _chart(self, id: str, title: str, stage: str, y_label: str, by_rank: dict, **axes) -> list[LineChart]:
        if not by_rank:
            return []
        series = [Series(f"rank {rank}", [(t, float(v)) for t, v in points])
                  for rank, points in sorted(by_rank.items())]
        return [LineChart(id, title, f"{stage}: sampled every {self.interval_s} s ({self.method})",
                          "time since the launch", y_label, series, x_unit="s", **axes)]


@dataclass(frozen=True)
class SamplerPeaks:
    """Per rank, from the time series: the peaks seen and the last CPU times."""

    peak_device_mem_bytes: int | None = None
    peak_rss_bytes: int | None = None
    cpu_user_s: float | None = field(default=None, metadata=OMIT)
    cpu_system_s: float | None = field(default=None, metadata=OMIT)


@dataclass(frozen=True)
class FailureRecord:
    """How a rank that did not finish ended, in its own words (elastic's error file and its log)."""

    exitcode: int | None
    signal: str | None
    message: str
    log_tail: str = ""


@dataclass(frozen=True)
class RankReturn:
    """What a rank sends back through elastic when it finished: who it was and its workload's result."""

    rank: int
    local_rank: int
    world_size: int
    pid: int
    hostname: str
    device: str
    backend: str
    memory_cap_applied: bool
    result: Any  # the workload's own record (records/<measurement>.py)


@dataclass(frozen=True, kw_only=True)
class RankOutcome:
    rank: int
    local_rank: int | None = None  # None only in the first reports, which did not record it
    pid: int | None
    device: str | None
    peak_mem_bytes: int | None
    status: str | None = None  # finished | failed | stopped by launcher (None: the first reports)
    peaks: SamplerPeaks | None = field(default=None, metadata=FLATTEN)
    world_size: int | None = field(default=None, metadata=OMIT)
    hostname: str | None = field(default=None, metadata=OMIT)
    # its machine's address toward the endpoint (machines may share one hostname); absent on one machine
    address: str | None = field(default=None, metadata=OMIT)
    backend: str | None = field(default=None, metadata=OMIT)
    memory_cap_applied: bool | None = field(default=None, metadata=OMIT)
    failure: FailureRecord | None = field(default=None, metadata=OMIT)
    # The workload's per-rank result, its keys beside the rest (an open object when read back).
    result: Any = field(default=None, metadata=FLATTEN)


@dataclass(frozen=True, kw_only=True)
class SessionRecord:
    """What every multi-rank measurement reports about its run (flattened into its results)."""

    backend: str
    backend_reason: str
    shared_device: bool
    placement: Any  # records.placement.Placement as JSON (the plan, with every option weighed)
    warnings: list[str]
    sharing_daemon: Any = None  # what the sharing daemon did, or None
    run_id: str
    run_dir: str
    world_size: int
    nnodes: int = 1
    completed: bool
    ranks: list[RankOutcome]
    torchrun_root_cause_rank: int | None = None
    launcher_error: str | None = None
    listen: Listened | None = None  # where the run listened (cluster/exposure.py); reports before it have none
    interrupted: bool = False
    hang: Hang | None = None
    # Who held the others up, when the run did not succeed (the same judge as `ddplab launch`'s).
    culprit: Culprit | None = field(default=None, metadata=OMIT)
    machines_lost: MachineLoss | None = field(default=None, metadata=OMIT)  # several machines: who vanished
    expected_failure: str | None = None
    expected_failure_observed: bool | None = None
    duration_s: float
    timeseries: Timeseries
    # The machine the run was on: written at the report's top level, not inside results.
    platform: Any = field(default=None, metadata=SKIP, compare=False)

    @staticmethod
    def json_upgrade(data: dict) -> dict:
        """In older reports a session's culprit lived in its hang record."""
        if isinstance(data, dict) and "culprit" not in data and isinstance(data.get("hang"), dict):
            earlier = Culprit.from_earlier_hang(data["hang"])
            if earlier is not None:
                data = {**data, "culprit": earlier}
        return data

    @property
    def host_only(self) -> bool:
        return bool(isinstance(self.placement, dict) and self.placement.get("host_only"))

    def failure_reason(self) -> str:
        """One line on why a run did not complete: the predicted refusal, or the first rank's last words."""
        if self.expected_failure_observed:
            return f"failed as expected: {self.expected_failure}"
        if self.launcher_error:
            return self.launcher_error
        if self.culprit:
            return f"{'hang' if self.hang else 'failure'}: {self.culprit.in_words()}: {self.culprit.reason}"
        if self.machines_lost:
            return f"machine lost: {', '.join(self.machines_lost.machines)} (ranks {self.machines_lost.ranks}): " \
                   f"{self.machines_lost.reason}"
        for rank in self.ranks:
            text = (rank.failure.message if rank.failure else "").strip()
            if text:
                return text.splitlines()[-1]
        return "a rank failed"


@dataclass(frozen=True)
class SharingDaemonPart:
    """A session's ``sharing_daemon``, as platform/sharing_daemon.py's ``PrivateDaemon.record()`` writes it."""

    name: str | None
    private: bool
    used: bool
    failure: str | None
    env: dict[str, str]
    events: list[str]


def report_parts() -> dict:
    """{(class, field): type} for the parts any report may hold: a session's placement and sharing daemon."""
    return {(SessionRecord, "placement"): Placement, (SessionRecord, "sharing_daemon"): SharingDaemonPart}


def session_parts(rank_result: type) -> dict:
    """{(class, field): type} for a record that flattens a session whose ranks return ``rank_result``."""
    return {(RankOutcome, "result"): rank_result}
