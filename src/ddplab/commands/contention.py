"""`ddplab contention`: the time-slicing tax of the report's section 3.2.

K processes run the same compute kernel (a square matmul, bf16 on accelerators, fp32 on
the host) on one device, for a fixed window, after one process ran it alone. Reports
aggregate efficiency (sum of the K rates / the solo rate) and each process's slowdown.
`--mps` runs the same with a private MPS daemon (measured on H200: 93% without, 99% with).
"""

from __future__ import annotations

import argparse

from .. import display, report
from ..config import check_number
from ..errors import UsageError
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

    return replace(opts, placement="shared")


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
        results.update({
            "method": "fixed window per phase; device synchronised every batch; TFLOP/s = 2 n^3 x matmuls / time",
            "matrix": values[0]["matrix"], "dtype": values[0]["dtype"], "seconds": s["seconds"],
            "solo_tflops": solo["tflops"],
            "together_tflops": rates,
            "aggregate_tflops": sum(rates),
            "efficiency": sum(rates) / solo["tflops"],
            "slowdown": [solo["tflops"] / r for r in rates],
        })
    verdict = "fail" if not results["completed"] else ("warn" if placement.warnings else "pass")
    return report.document("contention", {**opts.to_dict(), **s}, sess.platform.to_dict(), results, verdict)


def render(doc: dict, console) -> None:
    r = doc["results"]
    display.failures(r, console)
    if r["completed"]:
        rows = [("processes", f"{r['world_size']} on one device ({'MPS' if r['sharing_daemon'] else 'time slicing'})"),
                ("alone", f"{r['solo_tflops']:.2f} TFLOP/s"),
                ("together, each", ", ".join(f"{x:.2f}" for x in r["together_tflops"]) + " TFLOP/s"),
                ("aggregate efficiency", f"{100 * r['efficiency']:.1f}% of one process alone"),
                ("per-process slowdown", ", ".join(f"{x:.2f}x" for x in r["slowdown"])),
                ("kernel", f"{r['matrix']}x{r['matrix']} {r['dtype']} matmul; {r['method']}")]
        console.print(display.kv_table("Contention", rows))
    console.print(f"verdict: {display.verdict_text(doc['verdict'])} - {summary_line(r)}")


def summary_line(r: dict) -> str:
    if not r["completed"]:
        return display.failure_reason(r)
    return f"{r['world_size']} processes: {100 * r['efficiency']:.1f}% aggregate efficiency"


def main(args, console) -> int:
    return display.finish(execute(args, console), render, args.json, console)
