"""`ddplab clean [--yes] [--pid N]`: list orphaned ranks (a launcher marked them and that
launcher is provably gone) and, with --yes, end exactly those (SIGTERM, then SIGKILL) and
check the device memory came back. Other processes on the device are listed beside them
and never ended, unless the user names one with --pid.

Never by name: the report's `ps | grep python | xargs kill -9` kills every Python
process on the machine. See procs.py and docs/processes.md for the evidence an orphan needs.
"""

from __future__ import annotations

import argparse
import time

from .. import display, report

SUMMARY = "list (and with --yes end) orphaned ranks whose launcher is gone; anything else only by --pid"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--yes", action="store_true", help="end the listed processes (default: only list them)")
    parser.add_argument("--pid", type=int, default=None,
                        help="end this one process instead of the orphans (with --yes), e.g. another process "
                             "on the device; its start time is checked again just before the signal")
    parser.add_argument("--grace", type=float, default=5.0, help="seconds between SIGTERM and SIGKILL (default: 5)")
    parser.add_argument("--json", metavar="PATH", help="write the JSON report here")


def validate(args) -> None:
    from ..config import check_number
    from ..errors import UsageError
    from ..procs import refuse_to_name

    check_number(args.grace, "--grace", 0, 300, unit=" seconds")
    if args.pid is not None:
        why = refuse_to_name(args.pid)
        if why:
            raise UsageError("refused-pid", f"--pid {args.pid} is {why}; valid: the pid of another running "
                                            "process, e.g. one `ddplab clean` lists")


def execute(yes: bool, grace_s: float = 5.0, pid: int | None = None) -> dict:
    from .. import procs
    from ..platform import detect, open_monitor

    platform = detect(with_memory=False)
    monitor = open_monitor(platform.spec)
    try:
        found = procs.survey(monitor, platform.spec.device_node_globs)
        results = {**found.to_dict(), "named": None, "ended": None, "memory_returned": None}
        targets = found.orphans
        if pid is not None:
            named = procs.describe(pid, found)
            results["named"] = named.to_dict() if named else {"pid": pid, "gone": True}
            targets = [named] if named else []
        if yes and targets:
            results["ended"] = procs.end(targets, grace_s)
            held = _still_held(monitor, [t.pid for t in targets])
            results["memory_returned"] = not held if monitor.api else None
            results["memory_still_held"] = held
    finally:
        monitor.close()
    verdict = _verdict(targets, yes, results["ended"], results["memory_returned"])
    return report.document("clean", {"yes": yes, "grace_s": grace_s, "pid": pid}, platform.to_dict(), results,
                           verdict)


def _verdict(targets: list, yes: bool, ended: dict | None, memory_returned: bool | None) -> str:
    if targets and not yes:
        return "warn"  # something waits for --yes
    if ended and (ended["survived"] or ended["refused"] or memory_returned is False):
        return "fail"
    return "pass"


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
    if r["named"] is not None:
        _render_named(r["named"], console)
    else:
        _render_orphans(r["orphans"], console)
        render_other_processes(r["other_processes"], console)
    if r["ended"] is None:
        if r["named"] is not None and not r["named"].get("gone"):
            console.print(f"nothing ended: run `ddplab clean --pid {r['named']['pid']} --yes` to end it")
        elif r["named"] is None and r["orphans"]:
            console.print("nothing ended: run `ddplab clean --yes` to end exactly the orphans listed")
    else:
        e = r["ended"]
        console.print(f"ended: {len(e['terminated'])} by SIGTERM, {len(e['killed'])} by SIGKILL, "
                      f"{len(e['survived'])} survived (uninterruptible: the host may need a reboot)")
        if e.get("refused"):
            console.print(f"not signalled: pid(s) {e['refused']} started again since they were listed (pid reused)")
        if r["memory_returned"] is not None:
            console.print(f"device memory returned: {r['memory_returned']}")
    console.print(f"verdict: {display.verdict_text(doc['verdict'])}")


def _render_orphans(orphans: list[dict], console) -> None:
    if not orphans:
        console.print("no orphaned processes")
        return
    console.print(display.kv_table("Orphaned processes (launcher gone)", [
        (str(o["pid"]), f"age {o['age_s']:.0f}s, device mem {report.human_bytes(o['device_mem_bytes'])}, "
                        f"{o['reason']}\n{o['cmdline']}") for o in orphans]))


def render_other_processes(others: list[dict], console) -> None:
    """Shared with `env`: processes on the device that are not orphans."""
    if not others:
        return
    console.print(display.kv_table("Other processes on the device (never ended unless named: "
                                   "`ddplab clean --pid N --yes`)", [
        (str(o["pid"]), f"{o['program'] or '?'} (user {o['user'] or '?'}), device mem "
                        f"{report.human_bytes(o['device_mem_bytes'])}, age {_age_text(o['age_s'])}; "
                        f"{o['not_orphan_because']}") for o in others]))


def _age_text(age_s: float | None) -> str:
    return "?" if age_s is None else f"{age_s:.0f}s"


def _render_named(named: dict, console) -> None:
    if named.get("gone"):
        console.print(f"pid {named['pid']} is gone: nothing to end")
        return
    program = named.get("program") or named.get("cmdline")
    why = named.get("reason") or named.get("not_orphan_because")
    console.print(display.kv_table(f"Named process {named['pid']}", [
        ("program", program), ("user", named.get("user")), ("age", _age_text(named.get("age_s"))),
        ("device mem", report.human_bytes(named.get("device_mem_bytes"))), ("launcher evidence", why)]))


def main(args, console) -> int:
    return display.finish(execute(args.yes, args.grace, args.pid), render, args.json, console)
