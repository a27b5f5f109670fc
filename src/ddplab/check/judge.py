"""The node's verdict: the lab's stages and the expectations -> one CheckRecord.

Every row of the measurements' own checks becomes a NodeCheck (PASS -> OK, WARN -> WARNING, FAIL -> CRITICAL,
could not run -> UNKNOWN), with two built-in changes: orphaned ranks are CRITICAL (the next job would share the
device with them), and the storm's own latency line gives way to a latency bound where the expectations set one.
Then the rules: a thresholds file's entry, a baseline, and where neither bounds busbw, the copy-ceiling share.

A stopped check says so first, in an UNKNOWN row naming what stopped it and the stages left out; what the cut
stage failed to finish is UNKNOWN too, as a stop says nothing about the node. The node is then UNKNOWN, unless a
stage that finished before the stop found a CRITICAL fault (Status.worst).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, replace

from ..basics.interrupts import DEADLINE
from ..measurements import stage_checks
from ..records import Verdict
from ..records.core import InSession, Interruptible
from ..records.clean import ORPHANS_CHECK
from ..records.run import StageRecord
from . import rules
from .baseline import Baseline
from .metrics import machine_type, metrics_of, stage_of
from .record import PROBLEMS_ORDER, CheckRecord, MachineType, Metrics, NodeCheck, Reading, Status, problems
from .thresholds import Thresholds

BUILT_IN = "built-in defaults: exact data, nothing left behind, every measurement's own checks, busbw as a " \
           "share of the copy ceiling"
ESCALATED = {("env", ORPHANS_CHECK): (Status.CRITICAL, "built-in: nothing left behind (a node with orphaned "
                                                              "ranks is not ready for the next job)")}
SUPERSEDED_BY_LATENCY = {("storm", "mean all_reduce latency")}


@dataclass(frozen=True)
class Expectations:
    thresholds: Thresholds | None = None
    baseline: Baseline | None = None


@dataclass(frozen=True)
class Stop:
    """What ended a check before its stages all ran: a stop signal's name or DEADLINE, and the stages left out."""

    by: str
    not_run: tuple[str, ...] = ()


def judge(stages: list[StageRecord], platform, expectations: Expectations, *, stop: Stop | None = None,
          duration_s: float | None = None, out: str = "", from_report: str | None = None,
          injected: list[str] = (), finished_unix: float | None = None, deadline_s: float | None = None
          ) -> CheckRecord:
    """``finished_unix``: when the stages ended (a report judged again keeps its own time); default now.
    ``deadline_s``: the --deadline the stages ran under."""
    machine = machine_type(platform)
    metrics = metrics_of(stages)
    rows, sources = _rules(stages, machine, metrics, expectations)
    has_latency_bound = any(r.key.startswith(("latency.", "baseline.latency.")) for r in rows)
    checks = _stage_rows(stages, has_latency_bound, stopped=stop is not None) + rows
    if stop is not None:  # first: what a runner shows of an UNKNOWN node is why it is unknown
        checks.insert(0, _stopped_row(stop, stages, duration_s, deadline_s))
    checks = _unique_keys(checks)
    status = Status.worst(c.status for c in checks)
    return CheckRecord(status=status, summary=summary_line(checks), machine=machine, expectations=sources,
                       node_checks=checks, metrics=metrics,
                       finished_unix=round(time.time() if finished_unix is None else finished_unix, 3),
                       stages=stages, interrupted=stop is not None, stopped_by=stop.by if stop else None,
                       not_run=list(stop.not_run) if stop else [], duration_s=duration_s, deadline_s=deadline_s,
                       out=out, from_report=from_report, injected=list(injected))


def not_judged(message: str, next_step: str) -> CheckRecord:
    """The record of a check that could not run at all (a bad thresholds file, an error in ddplab, a stop before
    it began): UNKNOWN, saying why, so that the runners' files say so instead of keeping an older answer."""
    row = NodeCheck("check.ran", "check", "ran", Status.UNKNOWN, message, "the check runs",
                    "a check that could not run says nothing about the node", next_step)
    return CheckRecord(status=Status.UNKNOWN, summary=summary_line([row]), machine=None,
                       expectations=[], node_checks=[row], metrics=Metrics(), finished_unix=round(time.time(), 3))


def _stopped_row(stop: Stop, stages: list[StageRecord], duration_s: float | None, deadline_s: float | None
                 ) -> NodeCheck:
    if stop.by == DEADLINE:
        who = f"its {deadline_s:g} s deadline" if deadline_s is not None else "its deadline"
        next_step = ("give it a larger --deadline where the runner allows one (a check on 8 devices needs about "
                     "60 s), or find what made it slow in the report")
    else:
        who = stop.by
        next_step = "run the check again"
    parts = [f"stopped by {who}" + (f" after {duration_s:g} s" if duration_s is not None else "")]
    cut = [s.name for s in stages if cut_short(s)]
    if cut:
        parts.append(f"{', '.join(cut)} cut short")
    parts.append(f"not run: {', '.join(stop.not_run)}" if stop.not_run else "every stage had started")
    return NodeCheck("check.completed", "check", "completed", Status.UNKNOWN, "; ".join(parts),
                     "every stage runs", "a check that was stopped says nothing about the node (UNKNOWN), but for "
                                         "faults the stages that finished found", next_step)


def cut_short(stage: StageRecord) -> bool:
    """The stage a stop ended while it ran (its ranks or drills stopped, or a second Ctrl+C)."""
    if stage.error == "interrupted":
        return True
    results = stage.report.results if stage.report is not None else None
    stopped = [results, results.session if isinstance(results, InSession) else None]  # a drill's, or its ranks'
    return any(isinstance(r, Interruptible) and r.interrupted for r in stopped)


def _stage_rows(stages: list[StageRecord], has_latency_bound: bool, stopped: bool = False) -> list[NodeCheck]:
    out = []
    for stage in stages:
        stopped_here = stopped and cut_short(stage)
        for c in stage_checks(stage):
            if has_latency_bound and (stage.name, c.check) in SUPERSEDED_BY_LATENCY:
                continue
            status, rule, verdict = Status.of(c.verdict), f"{stage.name}'s own check: {c.meaning}", c.verdict
            if c.verdict is Verdict.SKIP and stage.verdict is not Verdict.SKIP:
                # a row that does not apply to this node (one device: no "one rank per device"), in a stage that
                # ran: nothing unknown about the node
                status, rule = Status.OK, f"{stage.name}: does not apply here ({c.value})"
            if (stage.name, c.check) in ESCALATED and status is Status.WARNING:
                status, rule = ESCALATED[(stage.name, c.check)]
                verdict = status.verdict
            if stopped_here and status is not Status.OK:
                status, rule, verdict = Status.UNKNOWN, f"the stop cut {stage.name} short: {rule}", None
            out.append(NodeCheck(f"{stage.name}.{slug(c.check)}", stage.name, c.check, status, c.value, c.threshold,
                                 rule, c.next_step, reading=_reading(stage, c), duration_s=stage.duration_s,
                                 verdict=verdict))
    return out


def _reading(stage: StageRecord, check) -> Reading | None:
    """The number behind a stage's own row, with the level it was judged against, where a runner charts it: the
    storm's mean latency, CRITICAL above the storm's threshold."""
    if (stage.name, check.check) not in SUPERSEDED_BY_LATENCY or stage.report is None:
        return None
    results = stage.report.results
    summary = getattr(results, "summary", None)
    if summary is None or getattr(results, "threshold_us", None) is None:
        return None
    return Reading(summary.mean_us, "us", critical=results.threshold_us)


def _rules(stages, machine: MachineType | None, metrics,
           expectations: Expectations) -> tuple[list[NodeCheck], list[str]]:
    rows: list[NodeCheck] = []
    sources = [BUILT_IN]
    busbw_bounded = False
    t = expectations.thresholds
    if t is not None:
        entry = t.for_machine(machine) if machine is not None else None
        if entry is None:
            rows.append(NodeCheck("expectations.machine_type", "check", "thresholds for this machine type",
                                  Status.WARNING, f"no entry of {t.path} matches {machine or 'this machine'}",
                                  "an entry that matches", f"thresholds {t.path}",
                                  "add a [[machine]] entry for this machine type (or a catch-all, device = \"*\")"))
        else:
            sources.append(f"thresholds {entry.where} ({entry.describe()})")
            rows += rules.bound_checks(metrics, list(entry.bounds))
            busbw_bounded = any(b.metric == "busbw" for b in entry.bounds)
    b = expectations.baseline
    if b is not None:
        if b.machine != machine:
            rows.append(NodeCheck("baseline.machine_type", "check", "baseline of this machine type", Status.UNKNOWN,
                                  f"the baseline {b.path} is of {b.machine}, this node is {machine}",
                                  "the same machine type", f"baseline {b.path}",
                                  "write a baseline on a good node of this type (--write-baseline)"))
        else:
            sources.append(f"baseline {b.path} (tolerance {100 * b.tolerance:g}%)")
            rows += rules.bound_checks(metrics, b.bounds(), prefix="baseline.")
            busbw_bounded = True
    if not busbw_bounded:
        sweep = stage_of(stages, "sweep")
        rows += rules.ceiling_share(metrics, rules.setup_of(sweep.report.results if sweep else None))
    return rows, sources


def summary_line(checks: list[NodeCheck], most: int = 3) -> str:
    """How many checks are not OK and the worst findings, one line: what a runner shows an operator first."""
    found = problems(checks)
    if not found:
        return f"{len(checks)} checks passed"
    counts = ", ".join(f"{n} {s.name.lower()}" for s in PROBLEMS_ORDER if (n := sum(c.status is s for c in found)))
    shown = "; ".join(c.message for c in found[:most])
    more = f"; and {len(found) - most} more" if len(found) > most else ""
    return f"{counts} of {len(checks)} checks: {shown}{more}"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def _unique_keys(checks: list[NodeCheck]) -> list[NodeCheck]:
    seen: dict[str, int] = {}
    out = []
    for c in checks:
        n = seen.get(c.key, 0)
        seen[c.key] = n + 1
        out.append(c if n == 0 else replace(c, key=f"{c.key}_{n + 1}"))
    return out
