"""Rows that `ddplab compare` lines up, from any source: nccl-tests text, a sweep, a storm, a train run.

A ``TimedRow`` is keyed by (op, size_bytes, in_place). nccl-tests' importer (nccl_tests.py) and the sweep
both produce the full ``SweepRow`` (records/sweep.py), whose ``timed_row()`` is its TimedRow; a storm
becomes one row (op "storm", its pipelined mean) and a train run one (op "train", step p50).

The hook: a results record that has ``timed_rows(config) -> list[TimedRow]`` can be compared, and compare
needs no change for it (``timed_rows_of``). A record that holds other reports (the lab's RunRecord) gives
its stages' rows, each prefixed with its stage name where that differs from the command (``stage_rows``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .core import Verdict

OMIT = {"omit_none": True}
# Written only when something is missing, so a comparison that lost nothing keeps the keys it always had.
OMIT_EMPTY = {"omit_default": True}


@dataclass(frozen=True)
class TimedRow:
    op: str
    size_bytes: int
    in_place: bool
    time_us: float
    busbw_gbps: float | None = None
    num_wrong: int | None = field(default=None, metadata=OMIT)

    @property
    def key(self) -> tuple[str, int, bool]:
        return self.op, self.size_bytes, self.in_place


def timed_rows_of(report) -> list[TimedRow]:
    """Every timing a report (records.Report) holds: its results record's ``timed_rows``, or none."""
    hook = getattr(report.results, "timed_rows", None)
    return list(hook(report.config)) if hook is not None else []


def stage_rows(stage: str, report) -> list[TimedRow]:
    """A stage's rows inside a lab report: ops prefixed "stage:" unless the stage is named after its command
    (so "storm-shared:storm" and "storm" line up with their own kind in the next week's run)."""
    rows = timed_rows_of(report)
    if stage == report.command:
        return rows
    return [replace(r, op=f"{stage}:{r.op}") for r in rows]


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
    """A stage of two lab reports whose verdict got worse."""

    stage: str
    old: Verdict
    new: Verdict


@dataclass(frozen=True)
class MissingRow:
    """A row A timed, at a size the verdict judges, that B did not time."""

    op: str
    size_bytes: int
    in_place: bool
    loss: bool
    """True: B's kind of input times this collective and placement (B is the same command or tool as A, or
    timed it at other sizes), so the row was lost: the comparison fails. False: B comes from another tool that
    does not time it at all (torch's all_reduce has no out-of-place form that nccl-tests times): a warning."""


@dataclass(frozen=True)
class CompareConfig:
    old: str  # the files, as given
    new: str
    tolerance: float  # allowed slowdown of B against A, as a fraction (0.05 = 5 %)
    min_size: int  # sizes below this are shown but not judged


@dataclass(frozen=True)
class CompareRecord:
    rows: list[ComparedRow]
    verdict_changes: list[VerdictChange]
    missing_stages: list[str] = field(default_factory=list, metadata=OMIT_EMPTY)
    """Stages A ran (not skipped) that B's lab report does not have: a failure."""
    missing_rows: list[MissingRow] = field(default_factory=list, metadata=OMIT_EMPTY)
    """A's timed rows, at sizes the verdict judges, that B did not time."""

    @property
    def lost_rows(self) -> list[MissingRow]:
        """Rows of A that B should have timed and did not: a failure."""
        return [m for m in self.missing_rows if m.loss]

    @property
    def regressions(self) -> list[ComparedRow]:
        return [r for r in self.rows if r.regression]

    @property
    def wrong(self) -> list[ComparedRow]:
        """Rows where B's data was wrong."""
        return [r for r in self.rows if r.new_wrong]

    def spikes(self, min_size: int) -> list[ComparedRow]:
        """Rows that are a spike in B, at a size the verdict judges."""
        return [r for r in self.rows if r.spike and r.size_bytes >= min_size]
