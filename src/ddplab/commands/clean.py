"""`ddplab clean [--yes]`: find processes whose launcher is gone and that hold a device or
carry ddplab/torchrun worker markers; list them (pid, age, command, device memory), and
with --yes end exactly those (SIGTERM, then SIGKILL) and check the memory came back.

Never by name: the report's `ps | grep python | xargs kill -9` kills every Python
process on the machine. See procs.py for the evidence each listed process must carry.
"""

from __future__ import annotations

import argparse
import time

from .. import display, report

SUMMARY = "list (and with --yes end) orphaned ranks whose launcher is gone; never anything else"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--yes", action="store_true", help="end the listed processes (default: only list them)")
    parser.add_argument("--grace", type=float, default=5.0, help="seconds between SIGTERM and SIGKILL (default: 5)")
    parser.add_argument("--json", metavar="PATH", help="write the JSON report here")


def validate(args) -> None:
    from ..config import check_number

    check_number(args.grace, "--grace", 0, 300, unit=" seconds")


def execute(yes: bool, grace_s: float = 5.0) -> dict:
    from .. import procs
    from ..platform import detect, open_monitor

    platform = detect(with_memory=False)
    monitor = open_monitor(platform.spec)
    try:
        orphans = procs.find_orphans(monitor, platform.spec.device_node_globs)
        results = {"orphans": [o.to_dict() for o in orphans], "ended": None, "memory_returned": None}
        if yes and orphans:
            results["ended"] = procs.end(orphans, grace_s)
            held = _still_held(monitor, [o.pid for o in orphans])
            results["memory_returned"] = not held if monitor.api else None
            results["memory_still_held"] = held
    finally:
        monitor.close()
    verdict = "pass"
    if orphans and not yes:
        verdict = "warn"
    if results["ended"] and (results["ended"]["survived"] or results["memory_returned"] is False):
        verdict = "fail"
    return report.document("clean", {"yes": yes, "grace_s": grace_s}, platform.to_dict(), results, verdict)


def _still_held(monitor, pids: list[int], wait_s: float = 5.0) -> dict[int, int]:
    deadline = time.monotonic() + wait_s
    while True:
        mem = monitor.sample().process_mem_bytes
        held = {p: mem[p] for p in pids if mem.get(p)}
        if not held or time.monotonic() > deadline:
            return held
        time.sleep(0.2)


def render(doc: dict, console) -> None:
    r = doc["results"]
    if not r["orphans"]:
        console.print("no orphaned processes")
    else:
        console.print(display.kv_table("Orphaned processes (launcher gone)", [
            (str(o["pid"]), f"age {o['age_s']:.0f}s, device mem {report.human_bytes(o['device_mem_bytes'])}, "
                            f"{o['reason']}\n{o['cmdline']}") for o in r["orphans"]]))
        if r["ended"] is None:
            console.print("nothing ended: run `ddplab clean --yes` to end exactly these processes")
        else:
            e = r["ended"]
            console.print(f"ended: {len(e['terminated'])} by SIGTERM, {len(e['killed'])} by SIGKILL, "
                          f"{len(e['survived'])} survived (uninterruptible: the host may need a reboot)")
            if r["memory_returned"] is not None:
                console.print(f"device memory returned: {r['memory_returned']}")
    console.print(f"verdict: {display.verdict_text(doc['verdict'])}")


def main(args, console) -> int:
    return display.finish(execute(args.yes, args.grace), render, args.json, console)
