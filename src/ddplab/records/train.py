"""The DDP experiment's records: what each rank proved and measured, and the run as reported."""

from __future__ import annotations

from dataclasses import dataclass, field

from .codec import flatten
from .compare import TimedRow
from .figures import LineChart, Series
from .machines import GATHERED, GatheredJob, JobMachines
from .session import Distribution, SessionRecord


@dataclass(frozen=True)
class TrainSettings:
    """What every rank of a train run does (rank side of config.TrainConfig)."""

    steps: int
    model: str
    batch_size: int
    seed: int
    check_every: int


@dataclass(frozen=True)
class TrainRankResult:
    """One rank's training: its synchronisation proofs, step times and memory (workloads/ddp_train.py)."""

    params_sha256: str
    all_params_sha256: list[str]  # every rank's digest as gathered by this rank: covers other machines' ranks
    grad_matches_reference: bool  # at every checked step
    grad_checks: int
    grad_worst_step: int
    grad_err_vs_concat_rel: float
    grad_err_vs_rank_average_rel: float
    device_numeric_noise_rel: float
    grad_rtol: float
    local_grad_rel_gap: float | None  # None with one rank: nothing to differ from
    local_grad_differs: bool | None  # the negative control
    final_loss: float
    step_times_us: list[float]
    step_time_p50_us: float
    peak_mem_bytes: int | None
    peak_mem_method: str
    num_params: int
    float32_matmul_precision: str
    # A job on several launchers: every rank and its machine (records/machines.py); never written per rank.
    machines: GatheredJob | None = field(default=None, metadata=GATHERED, compare=False)


@dataclass(frozen=True)
class MemorySeries:
    """Each rank's memory over time, as the report's memory chart draws it."""

    what: str  # "device memory", or "host RSS" where no rank's device memory was sampled
    by_rank: dict[int, list[tuple[float, int]]]  # rank -> (seconds since the launch, bytes)


@dataclass(frozen=True)
class TrainRecord:
    """The DDP experiment as reported: the session, the synchronisation proofs over all ranks, step times.

    The proofs are None when the run did not complete (nothing was proven either way);
    ``local_grad_differs`` is also None with one rank (no negative control possible).
    """

    session: SessionRecord = field(metadata=flatten())
    params_identical: bool | None
    grad_matches_reference: bool | None
    local_grad_differs: bool | None
    step_time_us: Distribution
    step_time_method: str
    machines: JobMachines | None = field(default=None, metadata={"omit_none": True})  # several launchers

    @property
    def proven(self) -> bool:
        """Completed, parameters identical, gradients equal to the reference, and the control told them apart."""
        return bool(self.session.completed and self.params_identical and self.grad_matches_reference
                    and self.local_grad_differs is not False)

    def timed_rows(self, config=None) -> list[TimedRow]:
        """The run as one comparable row: op "train", its step time p50."""
        if not self.session.completed or not self.step_time_us.n:
            return []
        return [TimedRow("train", 0, True, self.step_time_us.p50)]

    def memory_series(self) -> MemorySeries:
        """Device memory per rank over time from the sampler's series; host RSS where no device memory was seen."""
        samples = self.session.timeseries.samples
        device = any(r.device_mem_bytes for s in samples for r in s.ranks)
        by_rank: dict[int, list[tuple[float, int]]] = {}
        for sample in samples:
            for r in sample.ranks:
                value = r.device_mem_bytes if device else r.rss_bytes
                if value is not None:
                    by_rank.setdefault(r.rank, []).append((sample.t_s, value))
        return MemorySeries("device memory" if device else "host RSS", by_rank)

    def figures(self, stage: str) -> list[LineChart]:
        """Each rank's memory over the run, as the 0.5 s sampler saw it."""
        memory = self.memory_series()
        across = self.machines.figures(stage) if self.machines else []
        if not memory.by_rank:
            return across
        series = [Series(f"rank {rank}", [(t, float(v)) for t, v in points])
                  for rank, points in sorted(memory.by_rank.items())]
        ts = self.session.timeseries
        return [LineChart("memory-over-time", "Per-rank memory over time",
                          f"{stage}: sampled every {ts.interval_s} s ({ts.method})", "time (s)",
                          f"{memory.what} (MiB)", series, y_divisor=2**20), *across]
