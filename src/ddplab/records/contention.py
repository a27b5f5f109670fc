"""The contention measurement's records: each rank's matmul rates, and the efficiency as reported."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from .codec import FLATTEN
from .session import SessionRecord, session_parts


@dataclass(frozen=True)
class ContentionSettings:
    """What every rank computes (rank side of measurements.contention.ContentionConfig, resolved for the device)."""

    size: int  # matrix dimension
    seconds: float  # the window of each phase
    batch: int  # matmuls between device synchronisations


@dataclass(frozen=True)
class MatmulRate:
    matmuls: int
    elapsed_s: float
    tflops: float


@dataclass(frozen=True)
class ContentionRankResult:
    """One rank's two phases (workloads/contention.py): alone (rank 0 only) and together."""

    solo: MatmulRate | None  # None on every rank but 0 (written as null: the key is part of the contract)
    together: MatmulRate
    matrix: int
    dtype: str
    threads: int  # torch's intra-op threads in this rank
    usable_cores: int | None  # CPU affinity lowered by a cgroup quota; None: unknown


@dataclass(frozen=True, kw_only=True)
class Efficiency:
    """The K processes together against the ideal aggregate (measurements/contention.py says which ideal). Reports
    from before the ideal had a basis were all measured against the solo rate: they read back with basis "device"."""

    aggregate_tflops: float
    efficiency: float | None  # None: the ideal is unknown (usable cores unknown on the host)
    slowdown: list[float]  # per process: solo rate / its own rate together
    ideal_basis: str = "device"  # device | cores
    usable_cores: int | None = None
    threads_per_process: int | None = None
    ideal_factor: float | None = None
    ideal_aggregate_tflops: float | None = None
    aggregate_over_solo: float | None = None
    efficiency_method: str | None = None


@dataclass(frozen=True)
class ContentionSummary:
    method: str
    matrix: int
    dtype: str
    seconds: float
    solo_tflops: float
    together_tflops: list[float]
    against_ideal: Efficiency = field(metadata=FLATTEN)


@dataclass(frozen=True)
class ContentionRecord:
    """Contention as reported: the session and, when the ranks finished, the summary. No ``timed_rows``:
    `compare` lines up collectives, storms and train runs, not compute rates."""

    session: SessionRecord = field(metadata=FLATTEN)
    summary: ContentionSummary | None = field(default=None, metadata=FLATTEN)

    json_parts = partial(session_parts, ContentionRankResult)  # placement, ranks' results: checked when read back

    @property
    def time_sliced(self) -> bool:
        """The processes shared the device by time slicing: no sharing daemon (MPS) was used."""
        return not (self.session.sharing_daemon or {}).get("used")
