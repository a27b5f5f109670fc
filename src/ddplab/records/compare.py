"""Rows that `ddplab compare` lines up, from any source: nccl-tests text, a sweep, a storm, a train run.

A ``TimedRow`` is keyed by (op, size_bytes, in_place). nccl-tests' importer (nccl_tests.py) and the sweep
both produce the full ``SweepRow`` (records/sweep.py), which is a TimedRow with nccl-tests' columns; a
storm becomes one row (op "storm", its pipelined mean) and a train run one (op "train", step p50).
"""

from __future__ import annotations

from dataclasses import dataclass, field

OMIT = {"omit_none": True}


@dataclass(frozen=True)
class TimedRow:
    op: str
    size_bytes: int
    in_place: bool
    time_us: float | None
    busbw_gbps: float | None = None
    num_wrong: int | None = field(default=None, metadata=OMIT)

    @property
    def key(self) -> tuple[str, int, bool]:
        return self.op, self.size_bytes, self.in_place


@dataclass(frozen=True)
class ComparedRow:
    """One (op, size, placement) found in both A and B."""

    op: str
    size_bytes: int
    in_place: bool
    old_time_us: float
    new_time_us: float
    old_busbw_gbps: float | None
    new_busbw_gbps: float | None
    time_change: float  # B/A - 1
    regression: bool  # B slower than A beyond the tolerance, at a size the verdict judges
    new_wrong: bool
    spike: bool = False  # B's time is far off its neighbours: a finding, not a slowdown
    spike_factor: float | None = None


@dataclass(frozen=True)
class VerdictChange:
    stage: str
    old: str
    new: str


@dataclass(frozen=True)
class CompareConfig:
    old: str
    new: str
    tolerance: float
    min_size: int


@dataclass(frozen=True)
class CompareRecord:
    rows: list[ComparedRow]
    verdict_changes: list[VerdictChange]
