"""The DDP experiment's records: its Config (here, below the measurement, so that a drill that starts `ddplab train`
as its child can spell the command), what each rank proved and measured, and the run as reported."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from ..basics.cli_options import Range, argv_of, check_fields, nested, option
from .codec import FLATTEN, OMIT
from .config import LaunchOptions
from .core import TimedRow
from .figures import LineChart
from .machines import GATHERED, GatheredJob, JobMachines
from .session import Distribution, SessionRecord, session_parts


MODELS = ("linear", "mlp")
MAX_STEPS = 1_000_000
# Samples per rank per step: every rank also rebuilds all ranks' batches for the reference gradient.
MAX_BATCH_SIZE = 1 << 20
MAX_SEED = 2**32 - 1  # the batch generator's seed is seed * 1_000_003 + ..., which must stay below 2**64


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    launch: LaunchOptions = nested(LaunchOptions)
    steps: int = option("--steps", default=20, range=Range(1, MAX_STEPS))
    """Optimizer steps per rank."""
    model: str = option("--model", default="linear", choices=MODELS)
    """linear: the report's nn.Linear(10, 10); mlp: about 4.2 M parameters, a non-trivial all_reduce."""
    batch_size: int = option("--batch-size", default=20, range=Range(1, MAX_BATCH_SIZE))
    """Samples per rank per step (the report uses 20)."""
    seed: int = option("--seed", default=0, range=Range(0, MAX_SEED))
    """Seed of every rank's batches (and of the reference gradient built from them)."""
    check_every: int = option("--check-every", default=1, range=Range(1, MAX_STEPS))
    """Compare gradients with the single-process reference every N steps (first and last always)."""

    def __post_init__(self):
        check_fields(self)

    to_argv = argv_of  # the command line that gives this config back


@dataclass(frozen=True)
class TrainSettings:
    """What every rank of a train run does (rank side of TrainConfig)."""

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
class TrainRecord:
    """The DDP experiment as reported. The proofs are None when the run did not complete (nothing was proven either
    way); ``local_grad_differs`` is also None with one rank (no negative control possible)."""

    session: SessionRecord = field(metadata=FLATTEN)
    params_identical: bool | None
    grad_matches_reference: bool | None
    local_grad_differs: bool | None
    step_time_us: Distribution
    step_time_method: str
    machines: JobMachines | None = field(default=None, metadata=OMIT)  # several launchers

    json_parts = partial(session_parts, TrainRankResult)  # placement, ranks' results: checked when read back

    def timed_rows(self, config=None) -> list[TimedRow]:
        if not self.session.completed or not self.step_time_us.n:
            return []
        return [TimedRow("train", 0, True, self.step_time_us.p50)]

    def figures(self, stage: str) -> list[LineChart]:
        """Each rank's memory over the run, as the 0.5 s sampler saw it."""
        across = self.machines.figures(stage) if self.machines else []
        return [*self.session.timeseries.memory_chart(stage), *across]
