"""`ddplab contention`: the time-slicing tax of the report's section 3.2.

K processes run the same compute kernel (a square matmul, bf16 on accelerators, fp32 on
the host) on one device, for a fixed window, after one process ran it alone. Reports
aggregate efficiency (sum of the K rates / the ideal aggregate: the solo rate on one
device, min(K, usable cores) x the solo rate on the host; workloads/contention.py) and each
process's slowdown. `--mps` runs the same with a private MPS daemon (measured on H200: 93%
without, 99% with). Without `--mps` the processes time-slice: unlike other commands,
contention never takes the sharing daemon by default, because time slicing is what it measures.
"""

from __future__ import annotations

import argparse

from .. import display, report
from ..config import check_number
from ..errors import UsageError
from ..workloads import contention as measure
from . import options

SUMMARY = "K processes computing on one device vs one alone: efficiency and per-process slowdown"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_launch_arguments(parser)
    parser.add_argument("--size", type=int, default=None,
                        help="matrix dimension (default: 8192 on an accelerator, 512 on the host)")
    parser.add_argument("--seconds", type=float, default=3.0, help="measurement window per phase (default: 3)")


def settings(args, host_only: bool) -> dict:
    size = args.size or (512 if host_only else 8192)
    check_number(size, "--size", 16, 65536, integer=True)
    check_number(args.seconds, "--seconds", 0.1, 600)
    return {"size": size, "seconds": args.seconds, "batch": 4 if host_only else 20}


def launch_options(args):
    opts = options.launch_options(args)
    if opts.placement == "per-device":
        raise UsageError("contention-needs-shared-device",
                         "contention measures processes sharing one device; --per-device does not apply")
    from dataclasses import replace

    daemon = "off" if opts.sharing_daemon == "auto" else opts.sharing_daemon
    return replace(opts, placement="shared", sharing_daemon=daemon)


def validate(args) -> None:
    launch_options(args)
    settings(args, host_only=False)


def execute(args, console=None, live: bool = True) -> dict:
    from .. import session

    opts = launch_options(args)
    platform, placement = session.prepare(opts, with_memory=True)
    s = settings(args, placement.host_only)
    # Two operands and a result, float32 on the host and bfloat16 on a device (workloads/contention.py).
    matrix_bytes = s["size"] ** 2 * (4 if placement.host_only else 2)
    options.require_fits(platform, placement, 3 * matrix_bytes, f"--size {s['size']} (3 matrices per process)",
                         "contention-too-large", hint="lower --size")
    sess = session.run_workload("contention", s, opts, "contention", console, live, prepared=(platform, placement))
    results = sess.common_results()
    values = sess.rank_values()
    if values:
        solo = next(v["solo"] for v in values if v["solo"])
        rates = [v["together"]["tflops"] for v in values]
        first = values[0]
        summary = measure.summarise(solo["tflops"], rates, placement.host_only, first.get("threads", 1),
                                    first.get("usable_cores"))
        results.update({
            "method": "fixed window per phase; device synchronised every batch; TFLOP/s = 2 n^3 x matmuls / time; "
                      "efficiency = aggregate / ideal aggregate, " + summary["efficiency_method"],
            "matrix": first["matrix"], "dtype": first["dtype"], "seconds": s["seconds"],
            "solo_tflops": solo["tflops"],
            "together_tflops": rates,
            **summary,
        })
    return report.document("contention", {**opts.to_dict(), **s}, sess.platform.to_dict(), results,
                           verdict(results))


def verdict(results: dict) -> str:
    if not results["completed"]:
        return "fail"
    judged, _, _ = measure.judge(results)
    return report.worst([judged, "warn" if results["warnings"] else "pass"])


def render(doc: dict, console) -> None:
    r = doc["results"]
    display.failures(r, console)
    if r["completed"]:
        shared_by = "MPS" if (r["sharing_daemon"] or {}).get("used") else "time slicing"
        where = (f"on the host CPU ({r['usable_cores']} usable cores)" if r.get("ideal_basis") == "cores" else
                 f"on one device ({shared_by})")
        rows = [("processes", f"{r['world_size']} {where}"),
                ("alone", f"{r['solo_tflops']:.2f} TFLOP/s"),
                ("together, each", ", ".join(f"{x:.2f}" for x in r["together_tflops"]) + " TFLOP/s"),
                ("aggregate efficiency", efficiency_text(r)),
                ("per-process slowdown", ", ".join(f"{x:.2f}x" for x in r["slowdown"])),
                ("kernel", f"{r['matrix']}x{r['matrix']} {r['dtype']} matmul; {r['method']}")]
        console.print(display.kv_table("Contention", rows))
    console.print(f"verdict: {display.verdict_text(doc['verdict'])} - {summary_line(r)}")


def summary_line(r: dict) -> str:
    if not r["completed"]:
        return display.failure_reason(r)
    _, threshold, _ = measure.judge(r)
    return f"{r['world_size']} processes: {efficiency_text(r)} ({threshold})"


def efficiency_text(r: dict) -> str:
    if r.get("efficiency") is None:
        return f"n/a ({measure.judge(r)[2]})"
    if r.get("ideal_basis") == "cores":
        return (f"{100 * r['efficiency']:.1f}% of the ideal aggregate ({r['world_size']} processes on "
                f"{r['usable_cores']} usable cores = {r['ideal_factor']:g}x one process alone; measured "
                f"{r['aggregate_over_solo']:.2f}x)")
    return f"{100 * r['efficiency']:.1f}% of one process alone"


def main(args, console) -> int:
    return display.finish(execute(args, console), render, args.json, console)
