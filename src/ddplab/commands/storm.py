"""`ddplab storm`: the report's latency storm (10,000 x 4-byte all_reduce), measured properly.

Mean latency as the report defines it (wall time of N calls / N) but synchronised, the
report's own unsynchronised number beside it, the per-op distribution from a separate
blocking pass, device-side time from events (so dispatch overhead is visible), every
rank's CPU user/system time and context switches during the storm, and device
utilisation from the 0.5 s sampler. Verdict against a threshold chosen per setup.
"""

from __future__ import annotations

import argparse

from .. import display, report
from ..config import check_number
from . import options

SUMMARY = "latency storm: N tiny all_reduces, mean/p50/p99 latency, CPU cost, device time"
MAX_ITERS = 10_000_000
MAX_BYTES = 1 << 30
MAX_THRESHOLD_US = 60e6  # a minute per 4-byte all_reduce is no threshold at all
# What a rank holds per storm byte: its buffer and the backend's staging copies (gloo copies
# into its own buffers); a floor, so a refusal is certain to be right.
BUFFERS_PER_BYTE = 2
METHOD = ("mean: pipelined (N back-to-back all_reduces, one device sync, wall/N), averaged over ranks; "
          "per-op: blocking (device sync after each op, host perf_counter); device: event pairs per op")

# The report's 0.1 ms line is for device loopback. Other setups get a line that a healthy
# stack meets, with the measurement it comes from (shared/reference/measured.md).
THRESHOLDS = {
    "device": (100.0, "the report's warning line for device loopback (0.1 ms); measured 31 us on 2x H200 NCCL"),
    "gloo-on-device": (1000.0, "gloo stages device tensors through host memory; measured 371 us on H200"),
    "host": (1000.0, "gloo over loopback TCP on the host CPU; measured 164-300 us on an idle 2-core machine, 96 us on "
                     "16 cores; a busy host can double that"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_launch_arguments(parser)
    parser.add_argument("--iters", type=int, default=10_000, help="all_reduces in the storm (default: %(default)s)")
    parser.add_argument("--bytes", type=int, default=4, help="bytes per all_reduce (default: %(default)s)")
    parser.add_argument("--threshold-us", type=float, default=None,
                        help="fail above this mean latency (default: chosen per setup, printed)")
    parser.add_argument("--no-sample", dest="sample", action="store_false",
                        help="do not sample ranks while the storm runs (to measure the sampler's own cost)")


def settings(args) -> dict:
    check_number(args.iters, "--iters", 1, MAX_ITERS, integer=True)
    check_number(args.bytes, "--bytes", 1, MAX_BYTES, integer=True)
    if args.threshold_us is not None:
        check_number(args.threshold_us, "--threshold-us", 0, MAX_THRESHOLD_US, name="us", low_open=True,
                     reference="invalid-threshold")
    return {"iters": args.iters, "bytes": args.bytes, "warmup": min(100, args.iters),
            "per_op_iters": min(args.iters, 2000)}


def validate(args) -> None:
    options.launch_options(args)
    settings(args)


def threshold_for(placement, override: float | None) -> tuple[float, str]:
    if override is not None:
        return override, "set with --threshold-us"
    if placement.host_only:
        return THRESHOLDS["host"]
    if placement.backend == "gloo":
        return THRESHOLDS["gloo-on-device"]
    return THRESHOLDS["device"]


def execute(args, console=None, live: bool = True) -> dict:
    from .. import session

    opts = options.launch_options(args)
    prepared = session.prepare(opts, with_memory=True)
    options.require_fits(*prepared, BUFFERS_PER_BYTE * args.bytes, f"--bytes {args.bytes}", "storm-too-large",
                         hint="lower --bytes")
    s = session.run_workload("storm", settings(args), opts, "storm", console, live, sample=args.sample,
                             prepared=prepared)
    threshold, why = threshold_for(s.placement, args.threshold_us)
    results = summarise(s, threshold, why)
    verdict = "fail" if not results["completed"] or not results["correct"] or not results["within_threshold"] \
        else ("warn" if s.placement.warnings else "pass")
    config = {**opts.to_dict(), **settings(args), "threshold_us": args.threshold_us, "sample": args.sample}
    return report.document("storm", config, s.platform.to_dict(), results, verdict)


def summarise(s, threshold: float, why: str) -> dict:
    values = s.rank_values()
    results = s.common_results()
    if not values:
        return {**results, "correct": False, "within_threshold": False, "threshold_us": threshold,
                "threshold_reason": why}
    mean = sum(v["mean_us"] for v in values) / len(values)
    device = [v["device_us"] for v in values if v.get("device_us")]
    device_p50 = max(d["p50"] for d in device) if device else None
    util = [u for smp in s.sampler.samples for u in smp["device_util_pct"].values()]
    results.update({
        "method": METHOD,
        "mean_us": mean,
        "mean_us_max_rank": max(v["mean_us"] for v in values),
        "seed_method_us": max(v["seed_method_us"] for v in values),
        "per_op_us": _straggler_view([v["per_op_us"] for v in values]),
        "per_op_histogram": {"edges_us": values[0]["per_op_histogram"]["edges_us"],
                             "counts": [sum(c) for c in zip(*(v["per_op_histogram"]["counts"] for v in values))]},
        "device_us": _straggler_view(device) if device else None,
        # Device-bound when each op's device time is most of the wall time per op; then the
        # host is not the bottleneck and the dispatch overhead is hidden (negative difference).
        "mean_minus_device_us": (mean - device_p50) if device_p50 is not None else None,
        "bound_by": None if device_p50 is None else ("device" if device_p50 >= 0.8 * mean else "host dispatch"),
        "cpu_system_pct_of_wall": max(100 * v["cpu_system_s"] / v["storm_wall_s"] for v in values),
        "cpu_user_pct_of_wall": max(100 * v["cpu_user_s"] / v["storm_wall_s"] for v in values),
        "device_util_pct_max": max(util) if util else None,
        "correct": all(v["correct"] for v in values),
        "threshold_us": threshold,
        "threshold_reason": why,
        "within_threshold": mean <= threshold,
    })
    return results


def _straggler_view(dists: list[dict]) -> dict:
    """Each percentile's worst value over ranks (nccl-tests -I takes the max rank per iteration too)."""
    keys = ("min", "p50", "p90", "p99", "max", "mean")
    return {"n": dists[0]["n"], **{k: max(d[k] for d in dists) for k in keys}}


def render(doc: dict, console) -> None:
    r = doc["results"]
    console.print(display.rank_table("Ranks", r["ranks"]))
    display.failures(r, console)
    if not r["completed"]:
        console.print(f"verdict: {display.verdict_text(doc['verdict'])} - {summary_line(r)}")
        return
    per, dev = r["per_op_us"], r["device_us"]
    rows = [
        ("backend", f"{r['backend']}: {r['backend_reason']}"),
        ("mean latency (report's definition, synchronised)", f"{r['mean_us']:.2f} us  (slowest rank "
                                                             f"{r['mean_us_max_rank']:.2f} us)"),
        ("report's own script (no device sync)", f"{r['seed_method_us']:.2f} us"),
        ("per op, blocking", f"p50 {per['p50']:.2f}  p90 {per['p90']:.2f}  p99 {per['p99']:.2f}  "
                             f"max {per['max']:.2f} us  (n={per['n']})"),
        ("device time per op (events)", f"p50 {dev['p50']:.2f}  p99 {dev['p99']:.2f} us" if dev else "n/a (host)"),
        ("mean - device p50", f"{r['mean_minus_device_us']:.2f} us: bound by {r['bound_by']}"
         if r["mean_minus_device_us"] is not None else "n/a"),
        ("CPU during the storm (worst rank)", f"user {r['cpu_user_pct_of_wall']:.0f}%  system "
                                              f"{r['cpu_system_pct_of_wall']:.0f}% of wall time"),
        ("device utilisation (max sampled)", f"{r['device_util_pct_max']}%" if r["device_util_pct_max"] is not None
         else "n/a"),
        ("result correct", r["correct"]),
        ("threshold", f"{r['threshold_us']:.0f} us: {r['threshold_reason']}"),
        ("method", r["method"]),
    ]
    console.print(display.kv_table("Latency storm", rows))
    display.footer(console, r, doc["verdict"], summary_line(r))


def summary_line(r: dict) -> str:
    if not r["completed"]:
        return f"{r['backend']}: {display.failure_reason(r)}"
    side = "<=" if r["within_threshold"] else ">"
    return f"{r['backend']}: mean {r['mean_us']:.1f} us {side} {r['threshold_us']:.0f} us"


def main(args, console) -> int:
    return display.finish(execute(args, console), render, args.json, console)
