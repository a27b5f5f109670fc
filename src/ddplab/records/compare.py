"""Rows that `ddplab compare` lines up, from any source: nccl-tests text, a sweep, a storm, a train run.

A ``TimedRow`` is keyed by (op, size_bytes, in_place); a storm becomes one row (op "storm"), a train run one (op
"train"). Any results record with ``timed_rows(config)`` can be compared with no change to compare; the lab's gives
its stages' rows, prefixed with the stage name where that differs from the command (``stage_rows``). ``Spike``: a
size far off its neighbours (measurements/spikes.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..basics.cli_options import option
from ..basics.sizes import human, parse_size
from ..basics.validators import parse_tolerance, percent_text
from .codec import OMIT_DEFAULT, SKIP
from .core import Check, HasTimedRows, TimedRow, Verdict
from .figures import Highlight, LineChart, Series

MAX_TOLERANCE_PCT = 10_000  # B a hundred times slower than A: beyond that a tolerance means nothing


@dataclass(frozen=True)
class Neighbour:
    size_bytes: int
    time_us: float


@dataclass(frozen=True)
class Spike:
    """A size far off its neighbours (measurements/spikes.py): a finding to explain, never a number to average away."""

    op: str
    size_bytes: int
    in_place: bool
    time_us: float
    neighbours: list[Neighbour]
    factor: float  # its time over the longest time its neighbours make plausible

    @property
    def key(self) -> tuple[str, int, bool]:
        return self.op, self.size_bytes, self.in_place


@dataclass(frozen=True)
class BaselineRows:
    """Another run's or nccl-tests' timings, drawn dashed beside a report's own lines."""

    label: str  # e.g. "nccl-tests all_reduce_perf.txt"
    rows: list[TimedRow]


def timed_rows_of(report) -> list[TimedRow]:
    """Every timing a report holds: its results record's ``timed_rows`` (core.HasTimedRows), or none."""
    return list(report.results.timed_rows(report.config)) if isinstance(report.results, HasTimedRows) else []


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
    """`ddplab compare A B`: the two inputs, as given, and how B is judged against A."""

    old: str = option(metavar="A")
    """Baseline: nccl-tests text output or a ddplab JSON report."""
    new: str = option(metavar="B")
    """Candidate: nccl-tests text output or a ddplab JSON report."""
    tolerance: float = option("--tolerance", default=0.05, show=percent_text,
                              parse=lambda text, flag: parse_tolerance(text, flag, MAX_TOLERANCE_PCT))
    """Allowed slowdown of B against A (a fraction: 0.05 is 5%)."""
    min_size: int = option("--min-size", default=0, show=human,
                           parse=lambda text, flag: 0 if text == "0" else parse_size(text, flag))
    """Sizes below this (K, M, G or T for powers of 1024) are shown but not judged."""


@dataclass(frozen=True)
class CompareRecord:
    rows: list[ComparedRow]
    verdict_changes: list[VerdictChange]
    # Written only when something is missing, so a comparison that lost nothing keeps the keys it always had.
    missing_stages: list[str] = field(default_factory=list, metadata=OMIT_DEFAULT)
    """Stages A ran (not skipped) that B's lab report does not have: a failure."""
    missing_rows: list[MissingRow] = field(default_factory=list, metadata=OMIT_DEFAULT)
    """A's timed rows, at sizes the verdict judges, that B did not time."""
    config: CompareConfig | None = field(default=None, metadata=SKIP, compare=False)
    """What the rows were judged with (the tolerance, the smallest size judged): the report's config, kept beside
    the record as its platform is (records.core), so that its checks judge it alone."""

    @property
    def lost_rows(self) -> list[MissingRow]:
        """Rows of A that B should have timed and did not: a failure."""
        return [m for m in self.missing_rows if m.loss]

    @property
    def regressions(self) -> list[ComparedRow]:
        return [r for r in self.rows if r.regression]

    @property
    def wrong(self) -> list[ComparedRow]:
        return [r for r in self.rows if r.new_wrong]

    def spikes(self, min_size: int) -> list[ComparedRow]:
        """Rows that are a spike in B, at a size the verdict judges."""
        return [r for r in self.rows if r.spike and r.size_bytes >= min_size]

    def checks(self) -> list[Check]:
        """The comparison's verdict as check rows: slower rows, wrong data, worse verdicts, stages and rows of A
        that B lacks, spikes (judged with ``config``: the tolerance and the smallest size, as given)."""
        config = self.config
        tolerance = f"B within {100 * config.tolerance:g} % of A" if config else "B within the tolerance of A"
        min_size = config.min_size if config else 0
        slower, spiked, lost = self.regressions, self.spikes(min_size), self.lost_rows
        missing = "missing" if lost else "not timed by B's tool (a warning)"
        return [
            Check("no row slower", Verdict.FAIL if slower else Verdict.PASS, f"{len(slower)} of {len(self.rows)} rows "
                  "slower" + "".join(f"; {r.op} {r.size_bytes} B {'in' if r.in_place else 'out'} "
                                     f"{100 * r.time_change:+.1f} %" for r in slower[:3]), tolerance,
                  "B's time per op against A's at the same (collective, size, placement)",
                  "none" if not slower else "re-run B to rule out noise, then compare the two machines' `ddplab env`"),
            Check("B's data correct", Verdict.FAIL if self.wrong else Verdict.PASS, f"{len(self.wrong)} row(s) with "
                  "wrong data", "0", "every compared row of B gave exact results",
                  "none" if not self.wrong else "B's stack computes wrong sums: run `ddplab sweep` there"),
            Check("no verdict worse", Verdict.FAIL if self.verdict_changes else Verdict.PASS,
                  "; ".join(f"{c.stage}: {c.old.value.upper()} -> {c.new.value.upper()}" for c in self.verdict_changes)
                  or "none", "no stage worse", "two lab reports: each stage's verdict in B against A",
                  "none" if not self.verdict_changes else "read that stage in B's report"),
            Check("no stage of A missing", Verdict.FAIL if self.missing_stages else Verdict.PASS,
                  ", ".join(self.missing_stages) or "none", "every stage A ran", "two lab reports: a stage A ran "
                  "(not skipped) that B lacks hides whatever it would have found", "none" if not self.missing_stages
                  else "run those stages on B"),
            Check("no row of A missing", Verdict.FAIL if lost else Verdict.WARN if self.missing_rows else Verdict.PASS,
                  f"{len(self.missing_rows)} row(s) of A {missing}" if self.missing_rows else "none",
                  "every row A timed, at the sizes judged", "a row of A that B did not time cannot be compared",
                  "none" if not self.missing_rows else "time B at the same collectives, sizes and placements"),
            Check("no spike in B", Verdict.WARN if spiked else Verdict.PASS, f"{len(spiked)} spike(s)",
                  "none", "a size of B far off its neighbours: a finding to explain, not counted as slower",
                  "none" if not spiked else "re-run B at those sizes; a spike that stays is the stack's, not noise"),
        ]

    def figures(self, stage: str) -> list[LineChart]:
        """Per collective, time and busbw against size: A dashed, B solid; B's slower rows and spikes ringed."""
        out: list[LineChart] = []
        for op in dict.fromkeys(r.op for r in self.rows if r.size_bytes):
            rows = [r for r in self.rows if r.op == op and r.size_bytes]
            places = [p for p in (False, True) if any(r.in_place is p for r in rows)]

            def lines(a_value, b_value) -> list[Series]:
                series = []
                for p in places:
                    place = "in" if p else "out"
                    a = [(float(r.size_bytes), a_value(r)) for r in rows if r.in_place is p and a_value(r)]
                    b = [(float(r.size_bytes), b_value(r)) for r in rows if r.in_place is p and b_value(r)]
                    series += ([Series(f"B {place}", b)] if b else []) + ([Series(f"A {place}", a, True)] if a else [])
                return series

            marked = [r for r in rows if r.regression or r.spike]
            words = {id(r): f"spike: {r.spike_factor:.1f}x its neighbours" if r.spike else
                     f"slower: {100 * r.time_change:+.1f} %" for r in marked}
            out.append(LineChart(f"compare-time-{op}", f"{op}: A against B", f"{op}: time per op, A dashed, B solid",
                                 "message size", "time per op", lines(lambda r: r.old_time_us, lambda r: r.new_time_us),
                                 log_x=True, log_y=True, x_unit="bytes", y_unit="us",
                                 highlights=[Highlight(words[id(r)], float(r.size_bytes), r.new_time_us)
                                             for r in marked]))
            if any(r.new_busbw_gbps for r in rows):
                out.append(LineChart(f"compare-busbw-{op}", f"{op}: A against B", f"{op}: busbw, A dashed, B solid",
                                     "message size", "busbw (GB/s, GB = 1e9)",
                                     lines(lambda r: r.old_busbw_gbps, lambda r: r.new_busbw_gbps), log_x=True,
                                     x_unit="bytes", y_unit="GB/s",
                                     highlights=[Highlight(words[id(r)], float(r.size_bytes), r.new_busbw_gbps)
                                                 for r in marked if r.new_busbw_gbps]))
        return out
