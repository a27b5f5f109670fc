"""The first screen of a report, as data: the answer before the details (as Chrome's Lighthouse report does): the
verdict and its counts, the checks that need attention with their next step, the key figures, then every check by
stage, collapsed.

A row is shown as its verdict says, the same word as in the terminal and the JSON (a row written before INFO existed
is INFO too). A key figure never contradicts a row: the "processes left running" card is as bad as the worst row
about orphaned processes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .charts import duration_label, number_label, size_label
from ..records import Check, Report, Verdict
from ..records.core import ORPHANS_CHECK

if TYPE_CHECKING:
    from ..records.run import StageRecord
    from ..records.sweep import SweepRecord

INFO = str(Verdict.INFO)
ORDER = ("fail", "warn", "pass", INFO, "skip")
LEFT_RUNNING = "processes left running"


@dataclass(frozen=True)
class ShownCheck:
    check: Check
    shown: str  # fail | warn | pass | info | skip: the chip it gets


@dataclass(frozen=True)
class KeyFigure:
    label: str  # what it is: "all_reduce latency, 4 B"
    value: str  # the large number: "38.2 us"
    detail: str  # how it was measured, and what it is held against
    tone: str = ""  # a verdict class for its colour, or "" for a plain measurement


@dataclass(frozen=True)
class StageGroup:
    stage: str
    shown: str  # the stage's worst shown verdict
    checks: list[ShownCheck]

    def counts_in_words(self) -> str:
        """"2 PASS, 1 WARN": how many rows said what, in the order the rows say it."""
        return ", ".join(f"{n} {k.upper()}" for k, n in Counter(s.shown for s in self.checks).items())


@dataclass(frozen=True)
class Summary:
    verdict: Verdict
    counts: dict[str, int]  # shown verdict -> checks
    attention: list[ShownCheck]
    figures: list[KeyFigure]
    groups: list[StageGroup]

    def counts_in_words(self) -> str:
        names = {"fail": "failed", "warn": "warned", "pass": "passed", INFO: "informational", "skip": "skipped"}
        return ", ".join(f"{self.counts[k]} {names[k]}" for k in ORDER if self.counts.get(k))


def shown_verdict(check: Check) -> str:
    """The chip of a check row: its verdict; a PASS with nothing to meet (a report from before INFO) is INFO."""
    verdict = str(check.verdict)
    if verdict == "pass" and str(check.threshold).strip().lower().startswith("informational"):
        return INFO
    return verdict


def summarise(report: Report, checks: list[Check], stages: list[tuple[str, Report | None, StageRecord | None]]) \
        -> Summary:
    """``checks``: the rows of the verdict table, each with its stage; ``stages``: (name, its report, the lab's
    stage record) in order."""
    shown = [ShownCheck(c, shown_verdict(c)) for c in checks]
    counts = {k: sum(1 for s in shown if s.shown == k) for k in ORDER}
    attention = [s for s in shown if s.shown == "fail"] + [s for s in shown if s.shown == "warn"]
    groups: dict[str, list[ShownCheck]] = {}
    for s in shown:
        groups.setdefault(s.check.stage, []).append(s)
    return Summary(report.verdict, counts, attention, _agreeing(key_figures(stages), shown),
                   [StageGroup(stage, _worst(rows), rows) for stage, rows in groups.items()])


def _agreeing(figures: list[KeyFigure], shown: list[ShownCheck]) -> list[KeyFigure]:
    """The "processes left running" card, green for what this run left, beside a row that warns or fails about
    orphaned processes (of earlier jobs, on the same machine) takes that row's colour and says why."""
    orphan_rows = [s for s in shown if s.check.check == ORPHANS_CHECK and s.shown in ("fail", "warn")]
    if not orphan_rows:
        return figures
    worst = min(orphan_rows, key=lambda s: ORDER.index(s.shown))
    out = []
    for figure in figures:
        if figure.label == LEFT_RUNNING and ORDER.index(worst.shown) < ORDER.index(figure.tone or "pass"):
            figure = replace(figure, tone=worst.shown, detail=f"{figure.detail}; orphaned processes on the machine: "
                                                              f"{worst.check.value} ({worst.shown.upper()}, stage "
                                                              f"{worst.check.stage})")
        out.append(figure)
    return out


def _worst(rows: list[ShownCheck]) -> str:
    return min((s.shown for s in rows), key=ORDER.index, default="pass")


# ---------------------------------------------------------------------------------------------- key figures

def key_figures(stages: list[tuple[str, Report | None, StageRecord | None]]) -> list[KeyFigure]:
    results = [(name, rep.results, rep) for name, rep, _ in stages if rep is not None]
    out = [*_launch(results), *_latency(results), *_bandwidth(results), *_added_cost(results), *_drills(results)]
    left = _left_running(stages)
    return out + ([left] if left else [])


def _of(results, command: str) -> list:
    """The stages whose report a command wrote (its kind's record): a page imports no record it does not show."""
    return [(name, r, rep) for name, r, rep in results if rep.command == command]


def _latency(results) -> list[KeyFigure]:
    storms = [(name, r, rep) for name, r, rep in _of(results, "storm") if r.summary is not None
              and r.session.completed]
    if not storms:
        return []
    name, r, rep = storms[0]
    size = getattr(rep.config, "bytes", None)
    p99 = r.summary.per_op_us.p99
    detail = f"stage {name} ({r.session.backend}): back-to-back mean"
    if p99 is not None:
        detail += f"; one at a time p99 {duration_label(p99 * 1e-6)}"
    detail += f"; threshold {duration_label(r.threshold_us * 1e-6)}"
    others = [f"{n} {duration_label(o.summary.mean_us * 1e-6)}" for n, o, _ in storms[1:]]
    if others:
        detail += "; also " + ", ".join(others)
    label = "all_reduce latency" + (f", {size_label(size)}" if size else "")
    return [KeyFigure(label, duration_label(r.summary.mean_us * 1e-6), detail,
                      "pass" if r.within_threshold else "fail")]


def _bandwidth(results) -> list[KeyFigure]:
    """The peak busbw of every sweep; and, for ranks sharing one device, the peak against the device copy
    ceiling, which bounds it there (docs/metrics.md). Between devices the links bound it, not the copy."""
    out = []
    peak = _peak(_of(results, "sweep"))
    if peak:
        name, row, _ = peak
        out.append(KeyFigure("peak bus bandwidth", f"{number_label(row.busbw_gbps)} GB/s",
                             f"{_row_words(row)}, stage {name}; nccl-tests' busbw, GB = 1e9"))
    shared = _peak([(n, r, rep) for n, r, rep in _of(results, "sweep") if r.session.shared_device])
    if shared:
        name, row, sweep = shared
        ceiling, where = _ceiling(results, sweep)
        if ceiling:
            out.append(KeyFigure("shared device: busbw / copy ceiling", _percent(100 * row.busbw_gbps / ceiling),
                                 f"{number_label(row.busbw_gbps)} GB/s ({_row_words(row)}, stage {name}) against "
                                 f"the device copy ceiling {number_label(ceiling)} GB/s ({where})"))
    return out


def _peak(sweeps: list) -> tuple | None:
    """(stage, row, sweep) of the row with the highest busbw (the first such row on a tie), or None."""
    return max(((name, row, r) for name, r, _ in sweeps for row in r.rows if row.busbw_gbps is not None
                and row.size_bytes), key=lambda found: found[1].busbw_gbps, default=None)


def _ceiling(results, sweep: SweepRecord) -> tuple[float | None, str]:
    if sweep.ceiling is not None:
        return sweep.ceiling.gbps, "timed beside this sweep"
    for name, r, _ in _of(results, "ceiling"):
        if r.device_copy is not None:
            return r.device_copy.gbps, f"stage {name}"
    return None, ""


def _row_words(row) -> str:
    return f"{row.op} {size_label(row.size_bytes)} {'in-place' if row.in_place else 'out-of-place'}"


def _added_cost(results) -> list[KeyFigure]:
    for name, r, _ in [*_of(results, "storm"), *_of(results, "sweep")]:
        rows = sorted(r.added_cost or [], key=lambda a: a.size_bytes)
        if rows:
            a = rows[0]
            detail = (f"{a.op} {size_label(a.size_bytes)}, {a.timing}: torch "
                      f"{duration_label(a.torch_us * 1e-6)} vs the library alone "
                      f"{duration_label(a.library_us * 1e-6)} ({100 * a.share:.0f} % of torch's time), stage {name}")
            sign = "+" if a.added_us >= 0 else "-"
            return [KeyFigure("what torch adds per call", sign + duration_label(abs(a.added_us) * 1e-6), detail)]
    return []


def _drills(results) -> list[KeyFigure]:
    out = []
    for name, r, _ in _of(results, "drill"):
        seen = [d for d in r.drills if d.detect_s is not None]
        if not r.drills:
            continue
        parts = [f"{d.drill} {duration_label(d.detect_s)}" if d.detect_s is not None else f"{d.drill} not detected"
                 for d in r.drills]
        value = duration_label(max(d.detect_s for d in seen)) if seen else "none seen"
        tone = "pass" if all(d.verdict is Verdict.PASS for d in r.drills) else "fail"
        out.append(KeyFigure("slowest fault detection", value, f"stage {name}: " + ", ".join(parts), tone))
    return out


def _launch(results) -> list[KeyFigure]:
    out = []
    for _, r, _ in _of(results, "launch"):
        out.append(KeyFigure("the job", r.outcome.upper(), f"ran {duration_label(r.duration_s)}"
                             + (f"; noticed by {r.detected_by}" if r.detected_by else ""),
                             "pass" if r.succeeded else "fail"))
        if r.culprit:
            out.append(KeyFigure("culprit", "rank " + ", ".join(str(k) for k in r.culprit.ranks), r.culprit.reason,
                                 "fail"))
        if r.hang:
            out.append(KeyFigure("hang declared after", duration_label(r.hang.no_progress_s),
                                 f"without progress (hang timeout {duration_label(r.hang.hang_timeout_s)}); "
                                 f"ranks waiting: {', '.join(str(k) for k in r.hang.waiting_ranks) or 'none'}"))
        left = len(r.left_running)
        out.append(KeyFigure(LEFT_RUNNING, str(left), "processes carrying the job's run id after it "
                             "ended", "pass" if not left else "fail"))
    return out


def _left_running(stages) -> KeyFigure | None:
    for name, _, stage in stages:
        if stage is not None and stage.left_pids is not None:
            left = len(stage.left_pids) + len(stage.orphans or [])
            return KeyFigure(LEFT_RUNNING, str(left), stage.summary, "pass" if not left else "fail")
    return None


def _percent(value: float) -> str:
    return f"{value:.2g} %" if value < 10 else f"{value:.0f} %"
