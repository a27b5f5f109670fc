"""The node's verdict: the lab's stages and the expectations -> one CheckRecord.

Every row of the measurements' own checks becomes a NodeCheck (PASS -> OK, WARN -> WARNING, FAIL -> CRITICAL,
a stage that could not run here -> UNKNOWN), with two built-in changes a node check needs: orphaned ranks on
the machine are CRITICAL (the next job would share the device with them), and the storm's own latency line
gives way to a latency bound where the expectations set one. Then the rules (rules.py): a thresholds file's
entry for this machine type, a baseline, and, where neither bounds busbw, busbw as a share of the copy ceiling.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, replace

from ..lab import stage_checks
from ..records import Verdict
from ..records.clean import ORPHANS_CHECK
from ..records.run import StageRecord
from . import rules
from .baseline import Baseline
from .metrics import machine_type, metrics_of, stage_of
from .record import CheckRecord, MachineType, NodeCheck, Status
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


def judge(stages: list[StageRecord], platform, expectations: Expectations, *, interrupted: bool = False,
          duration_s: float | None = None, out: str = "", from_report: str | None = None,
          injected: list[str] = ()) -> CheckRecord:
    machine = machine_type(platform)
    metrics = metrics_of(stages)
    rows, sources = _rules(stages, machine, metrics, expectations)
    has_latency_bound = any(r.key.startswith(("latency.", "baseline.latency.")) for r in rows)
    checks = _stage_rows(stages, has_latency_bound) + rows
    if interrupted:
        checks.append(NodeCheck("check.completed", "check", "check completed", Status.UNKNOWN,
                                "interrupted: partial report", "every stage runs",
                                "a stop signal (Ctrl+C, SIGTERM) ended the check early", "run the check again"))
    checks = _unique_keys(checks)
    status = Status.worst(c.status for c in checks)
    return CheckRecord(status=status, summary=summary_line(status, checks), machine=machine, expectations=sources,
                       node_checks=checks, metrics=metrics, finished_unix=round(time.time(), 3), stages=stages,
                       interrupted=interrupted, duration_s=duration_s, out=out, from_report=from_report,
                       injected=list(injected))


def _stage_rows(stages: list[StageRecord], has_latency_bound: bool) -> list[NodeCheck]:
    out = []
    for stage in stages:
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
            out.append(NodeCheck(f"{stage.name}.{slug(c.check)}", stage.name, c.check, status, c.value, c.threshold,
                                 rule, c.next_step, duration_s=stage.duration_s, verdict=verdict))
    return out


def _rules(stages, machine: MachineType | None, metrics, expectations: Expectations) -> tuple[list[NodeCheck], list[str]]:
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


def summary_line(status: Status, checks: list[NodeCheck], most: int = 3) -> str:
    """The status and the worst findings, one line: what a runner shows an operator first."""
    problems = sorted((c for c in checks if c.status is not Status.OK),
                      key=lambda c: [Status.CRITICAL, Status.UNKNOWN, Status.WARNING].index(c.status))
    if not problems:
        return f"{len(checks)} checks passed"
    counts = ", ".join(f"{n} {s.name.lower()}" for s in (Status.CRITICAL, Status.UNKNOWN, Status.WARNING)
                       if (n := sum(c.status is s for c in problems)))
    shown = "; ".join(c.message for c in problems[:most])
    more = f"; and {len(problems) - most} more" if len(problems) > most else ""
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
