"""`ddplab ceiling`: the loopback ceiling of the report's section 3.2.

One rank on device 0 copies S bytes device-to-device (reported as copy rate S/t, bytes
counted once, and as memory traffic 2S/t, read + written) and host<->device through
pinned memory. "If loopback bandwidth is far below memory bandwidth, the copy path is
broken": a shared-device sweep states its busbw as a fraction of this copy rate.
"""

from __future__ import annotations

import argparse

from .. import display, report
from ..config import LaunchOptions, check_number
from ..sizes import parse_size
from . import options

SUMMARY = "device-to-device and host<->device copy bandwidth (the loopback ceiling)"
MAX_ITERS = 10_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bytes", default="1G", help="bytes per device copy, K/M/G suffixes (default: 1G)")
    parser.add_argument("--host-bytes", default="256M", help="bytes per host<->device copy (default: 256M)")
    parser.add_argument("--iters", type=int, default=20, help="timed copies; the median is reported (default: 20)")
    parser.add_argument("--device", default="auto", help="device type (default: detected accelerator, else cpu)")
    parser.add_argument("--run-dir", default=None, help="directory for logs and results")
    parser.add_argument("--json", metavar="PATH", help="write the JSON report here")


def settings(args) -> dict:
    check_number(args.iters, "--iters", 1, MAX_ITERS, integer=True)
    return {"bytes": parse_size(args.bytes, "--bytes"), "host_bytes": parse_size(args.host_bytes, "--host-bytes"),
            "iters": args.iters}


def launch_options(args) -> LaunchOptions:
    return LaunchOptions(nproc=1, placement="per-device", device=args.device, run_dir=args.run_dir)


def validate(args) -> None:
    launch_options(args)
    settings(args)


def execute(args, console=None, live: bool = True) -> dict:
    from .. import session

    opts = launch_options(args)
    prepared = session.prepare(opts, with_memory=True)
    copy_bytes = settings(args)["bytes"]
    options.require_fits(*prepared, 2 * copy_bytes, f"--bytes {args.bytes} (a source and a destination buffer)",
                         "ceiling-too-large", hint="lower --bytes")
    s = session.run_workload("ceiling", settings(args), opts, "ceiling", console, live, prepared=prepared)
    results = s.common_results()
    values = s.rank_values()
    if values:
        results.update({k: values[0][k] for k in ("device_copy", "host_to_device", "device_to_host")
                        if k in values[0]})
    verdict = "pass" if results["completed"] else "fail"
    return report.document("ceiling", {**opts.to_dict(), **settings(args)}, s.platform.to_dict(), results, verdict)


def render(doc: dict, console) -> None:
    r = doc["results"]
    display.failures(r, console)
    if not r["completed"]:
        console.print(f"verdict: {display.verdict_text(doc['verdict'])}")
        return
    d = r["device_copy"]
    rows = [("device copy", f"{d['gbps']:.1f} GB/s copy rate (bytes counted once), {d['rw_gbps']:.1f} GB/s memory "
                            f"traffic (read + written); {d['size_bytes']} B, median of {d['iters']} "
                            f"({d['method']})")]
    for key, label in (("host_to_device", "host -> device"), ("device_to_host", "device -> host")):
        if key in r:
            rows.append((label, f"{r[key]['gbps']:.1f} GB/s (pinned, {r[key]['size_bytes']} B, {r[key]['method']})"))
    console.print(display.kv_table("Loopback ceiling (GB = 1e9 bytes)", rows))
    console.print(f"verdict: {display.verdict_text(doc['verdict'])} - {summary_line(r)}")


def summary_line(r: dict) -> str:
    if not r["completed"]:
        return display.failure_reason(r)
    return f"device copy {r['device_copy']['gbps']:.1f} GB/s ({r['device_copy']['rw_gbps']:.1f} GB/s read+write)"


def main(args, console) -> int:
    return display.finish(execute(args, console), render, args.json, console)
