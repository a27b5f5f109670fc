"""The rules a check applies beyond the measurements' own: bounds from a thresholds file or a baseline, and the
built-in defaults where none is given (busbw as a share of the copy ceiling).

Each rule gives NodeChecks with the number it judged and its bounds (a Reading), so the Nagios perfdata and
the Prometheus gauges carry the same warning and critical levels the verdict used.
"""

from __future__ import annotations

from ..basics.sizes import human
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
    return _judged(key, "sweep", f"{row.op} busbw {human(row.size_bytes)} B {row.placement_words}", row.busbw_gbps,
                   f"{row.busbw_gbps:.3g} GB/s{extra}", bound, "GB/s", "",
                   "compare with nccl-tests on this node (`ddplab compare`); look for a link that fell back "
                   "(topology, PCIe instead of the device fabric) or a device that is throttled")


def _latency_bound(metrics: Metrics, bound: Bound, prefix: str) -> NodeCheck:
    value = metrics.latency.quantile(bound.quantile) if metrics.latency else None
    return _judged(f"{prefix}latency.{bound.quantile}", "storm", f"all_reduce latency {bound.quantile}", value,
                   f"{value:.1f} us ({metrics.latency.size_bytes} B)" if value is not None else "", bound, "us",
                   "see the storm stage",
                   "check the sharing daemon, the backend chosen (`ddplab env`) and the driver's launch overhead")


def _ceiling_bound(metrics: Metrics, bound: Bound, prefix: str) -> NodeCheck:
    value = metrics.copy_ceiling_gbps
    return _judged(f"{prefix}copy_ceiling", "ceiling", "device copy bandwidth", value,
                   f"{value:.1f} GB/s" if value is not None else "", bound, "GB/s", "see the ceiling stage",
                   "the device's memory is slower than on the baseline node: clocks, ECC, thermal throttling")


def _judged(key: str, stage: str, name: str, value: float | None, shown: str, bound: Bound, unit: str,
            unmeasured: str, fix: str) -> NodeCheck:
    """``value`` (``shown``: in words) held to ``bound``: UNKNOWN when it was not measured (``unmeasured``: the next
    step then), ``fix`` the next step when it is not OK; its Reading carries the bound's levels."""
    threshold = threshold_text(bound, unit)
    if value is None:
        return NodeCheck(key, stage, name, Status.UNKNOWN, "not measured", threshold, bound.where, unmeasured)
    status = judge_value(value, bound)
    return NodeCheck(key, stage, name, status, shown, threshold, bound.where, "none" if status is Status.OK else fix,
                     reading=Reading(value, unit, bound.warning, bound.critical, floor=bound.floor))
