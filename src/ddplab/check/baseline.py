"""Hold a node against a good one: `--baseline report.json --tolerance 5%`.

A baseline is the JSON report of a check on a node known to be good (`--write-baseline PATH` writes it), or of
a lab run (`ddplab run`). Its numbers become bounds: each collective's busbw at its largest size and the copy
rate may fall at most the tolerance below the baseline's, the storm's mean latency rise at most the tolerance
above it; beyond --tolerance is a WARNING, beyond --critical-tolerance (when given) CRITICAL. Small sizes are
left out on purpose: their busbw is latency, and latency is judged once, by the storm.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError
from .metrics import machine_type, metrics_of
from .record import MachineType, Metrics
from .thresholds import Bound


@dataclass(frozen=True)
class Baseline:
    path: str
    machine: MachineType | None
    metrics: Metrics
    tolerance: float
    critical_tolerance: float | None

    def bounds(self) -> list[Bound]:
        where = f"baseline {self.path}, tolerance {100 * self.tolerance:g}%" + (
            f" (CRITICAL beyond {100 * self.critical_tolerance:g}%)" if self.critical_tolerance is not None else "")
        below = lambda base, tol: None if tol is None else base * (1 - tol)  # noqa: E731
        above = lambda base, tol: None if tol is None else base * (1 + tol)  # noqa: E731
        out = [Bound("busbw", below(r.busbw_gbps, self.tolerance), below(r.busbw_gbps, self.critical_tolerance),
                     where, op=r.op, size=r.size_bytes, in_place=r.in_place)
               for r in sorted(self.metrics.largest(), key=lambda r: (r.op, r.placement))]
        if self.metrics.latency is not None:
            mean = self.metrics.latency.mean_us
            out.append(Bound("latency", above(mean, self.tolerance), above(mean, self.critical_tolerance), where,
                             op="all_reduce", quantile="mean"))
        if self.metrics.copy_ceiling_gbps is not None:
            copy = self.metrics.copy_ceiling_gbps
            out.append(Bound("copy_ceiling", below(copy, self.tolerance), below(copy, self.critical_tolerance), where))
        return out


def load(path: str, tolerance: float, critical_tolerance: float | None) -> Baseline:
    """Read a check's or a lab run's report (refused with exit 2, naming the file and the field, when it is not
    one) and keep its machine type and numbers."""
    from ..reading.catalog import read_report

    try:
        report = read_report(path)
    except UsageError as err:
        raise UsageError("invalid-baseline", f"--baseline: {err.message}", hint=err.hint) from None
    if report.command == "check":
        machine, metrics = report.results.machine, report.results.metrics
    elif report.command == "run":
        machine, metrics = machine_type(report.platform), metrics_of(report.results.stages)
    else:
        raise UsageError("invalid-baseline", f"--baseline {path} is a ddplab {report.command} report; a baseline is "
                                             "the report of `ddplab check` on a good node (--write-baseline) or of "
                                             "`ddplab run`")
    baseline = Baseline(path, machine, metrics, tolerance, critical_tolerance)
    if not baseline.bounds():
        raise UsageError("invalid-baseline", f"--baseline {path} holds no busbw, latency or copy rate to compare "
                                             "with (its stages did not complete)")
    return baseline
