"""The rules a check applies beyond the measurements' own: bounds from a thresholds file or a baseline, and the
built-in defaults where none is given (busbw as a share of the copy ceiling).

Each rule gives NodeChecks with the number it judged and its bounds (a Reading), so the Nagios perfdata and
the Prometheus gauges carry the same warning and critical levels the verdict used.
"""

from __future__ import annotations

from ..sizes import human
from .record import Busbw, Metrics, NodeCheck, Reading, Status
from .thresholds import ANY, Bound

# Built-in busbw floor: each collective's busbw at its largest size, as a share of the device copy rate (the
# loopback ceiling, `ddplab ceiling`), per setup, about a quarter of what was measured on a healthy machine
# (docs/RESULTS.md). A WARNING: a thresholds file or a baseline says what a machine type must reach.
CEILING_SHARE = {
    "device": (0.05, "one rank per device through the vendor's library: 13-16% measured on 2x H200 over NVLink "
                     "(295 GB/s at 256 MiB against a 2,119 GB/s copy); a path that fell back to PCIe gives about 1%"),
    "shared-device": (0.0002, "ranks sharing one device: 0.09-0.10% measured with gloo on one H200 (2 GB/s "
                              "against 2,119 GB/s), as gloo stages every byte through host memory"),
    "host": (0.005, "gloo over loopback on the host CPU: 8-30% at 512 KiB measured on the busy 2-core CPU machine "
                    "(copy rate 2-21 GB/s)"),
}


def setup_of(sweep_results) -> str:
    """Which ceiling-share floor applies: from the placement the sweep's session recorded."""
    placement = sweep_results.session.placement if sweep_results is not None else None
    placement = placement if isinstance(placement, dict) else {}
    if placement.get("host_only"):
        return "host"
    return "shared-device" if placement.get("shared_device") else "device"


def judge_value(value: float, bound: Bound) -> Status:
    worse = (lambda x, b: x < b) if bound.floor else (lambda x, b: x > b)
    if bound.critical is not None and worse(value, bound.critical):
        return Status.CRITICAL
    if bound.warning is not None and worse(value, bound.warning):
        return Status.WARNING
    return Status.OK


def threshold_text(bound: Bound, unit: str) -> str:
    """">= 300 GB/s, else WARNING; >= 150 GB/s, else CRITICAL"."""
    side = ">=" if bound.floor else "<="
    return "; ".join(f"{side} {v:.4g} {unit}, else {name}" for name, v in (("WARNING", bound.warning),
                                                                          ("CRITICAL", bound.critical))
                     if v is not None)


def ceiling_share(metrics: Metrics, setup: str) -> list[NodeCheck]:
    """Built-in: each collective's busbw at its largest size >= a share of the device copy rate."""
    share, why = CEILING_SHARE[setup]
    rows = metrics.largest()
    if not rows:
        return []
    ceiling = metrics.copy_ceiling_gbps
    if ceiling is None:
        return [NodeCheck("busbw.copy_ceiling", "sweep", "busbw against the copy ceiling", Status.UNKNOWN,
                          "the copy ceiling was not measured", f">= {100 * share:g}% of the copy ceiling",
                          "built-in: busbw as a share of the copy ceiling", "see the ceiling stage")]
    bound = Bound("busbw", ceiling * share, None, f"built-in: >= {100 * share:g}% of the copy ceiling ({why})")
    return [_busbw_check(row, bound, f"busbw.{row.op}.{row.placement}.{row.size_bytes}",
                         extra=f" = {100 * row.busbw_gbps / ceiling:.2f}% of the {ceiling:.1f} GB/s copy ceiling")
            for row in sorted(rows, key=lambda r: (r.op, r.placement))]


def bound_checks(metrics: Metrics, bounds: list[Bound], prefix: str = "") -> list[NodeCheck]:
    """Every bound against the numbers it names; a bound on something not measured is UNKNOWN."""
    out: list[NodeCheck] = []
    for bound in bounds:
        if bound.metric == "busbw":
            out += _busbw_bound(metrics, bound, prefix)
        elif bound.metric == "latency":
            out.append(_latency_bound(metrics, bound, prefix))
        else:
            out.append(_ceiling_bound(metrics, bound, prefix))
    return out


def _busbw_bound(metrics: Metrics, bound: Bound, prefix: str) -> list[NodeCheck]:
    candidates = metrics.largest() if bound.size is None else metrics.busbw
    rows = [r for r in candidates if (bound.op == ANY or r.op == bound.op)
            and (bound.size is None or r.size_bytes == bound.size)
            and (bound.in_place is None or r.in_place == bound.in_place)]
    if not rows:
        what = f"{bound.op} busbw at {human(bound.size) if bound.size else 'the largest size'}"
        return [NodeCheck(f"{prefix}busbw.{bound.op}.{bound.size or 'largest'}".replace("*", "any"), "sweep", what,
                          Status.UNKNOWN, "not measured", threshold_text(bound, "GB/s"), bound.where,
                          "check that the sweep ran; a size must be one the check's sweep runs on this machine")]
    return [_busbw_check(r, bound, f"{prefix}busbw.{r.op}.{r.placement}.{r.size_bytes}")
            for r in sorted(rows, key=lambda r: (r.op, r.placement, r.size_bytes))]


def _busbw_check(row: Busbw, bound: Bound, key: str, extra: str = "") -> NodeCheck:
    status = judge_value(row.busbw_gbps, bound)
    return NodeCheck(key, "sweep", f"{row.op} busbw {human(row.size_bytes)} B {row.placement_words}", status,
                     f"{row.busbw_gbps:.3g} GB/s{extra}", threshold_text(bound, "GB/s"), bound.where,
                     "none" if status is Status.OK else
                     "compare with nccl-tests on this node (`ddplab compare`); look for a link that fell back "
                     "(topology, PCIe instead of the device fabric) or a device that is throttled",
                     reading=Reading(row.busbw_gbps, "GB/s", bound.warning, bound.critical, floor=True))


def _latency_bound(metrics: Metrics, bound: Bound, prefix: str) -> NodeCheck:
    key, name = f"{prefix}latency.{bound.quantile}", f"all_reduce latency {bound.quantile}"
    value = metrics.latency.quantile(bound.quantile) if metrics.latency else None
    if value is None:
        return NodeCheck(key, "storm", name, Status.UNKNOWN, "not measured", threshold_text(bound, "us"),
                         bound.where, "see the storm stage")
    status = judge_value(value, bound)
    return NodeCheck(key, "storm", name, status, f"{value:.1f} us ({metrics.latency.size_bytes} B)",
                     threshold_text(bound, "us"), bound.where,
                     "none" if status is Status.OK else "check the sharing daemon, the backend chosen (`ddplab env`) "
                                                        "and the driver's launch overhead",
                     reading=Reading(value, "us", bound.warning, bound.critical, floor=False))


def _ceiling_bound(metrics: Metrics, bound: Bound, prefix: str) -> NodeCheck:
    key, value = f"{prefix}copy_ceiling", metrics.copy_ceiling_gbps
    if value is None:
        return NodeCheck(key, "ceiling", "device copy bandwidth", Status.UNKNOWN, "not measured",
                         threshold_text(bound, "GB/s"), bound.where, "see the ceiling stage")
    status = judge_value(value, bound)
    return NodeCheck(key, "ceiling", "device copy bandwidth", status, f"{value:.1f} GB/s",
                     threshold_text(bound, "GB/s"), bound.where,
                     "none" if status is Status.OK else "the device's memory is slower than on the baseline node: "
                                                        "clocks, ECC, thermal throttling",
                     reading=Reading(value, "GB/s", bound.warning, bound.critical, floor=True))
