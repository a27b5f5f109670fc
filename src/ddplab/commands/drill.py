"""`ddplab drill NAME`: reproduce a fault on purpose, measure how the stack reacts, and show
that ddplab's supervision names the right rank and leaves nothing behind.

NAME is one of the drills in ddplab.drills (kill-rank and kill_rank both work), or
`all`, or `short` (the set `ddplab run` uses: kill_rank, kill_launcher, late_rank, stall).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import display, drills, interrupts, report
from ..config import LaunchOptions
from ..errors import UsageError, invalid_choice

SUMMARY = "fault drills: kill a rank or the launcher, Ctrl+C, late/stalled/straggling/desynced/OOM rank"
SHORT_SET = ("kill_rank", "kill_launcher", "late_rank", "stall")
LAUNCHERS = ("ddplab", "torchrun")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", help=f"one of {', '.join(drills.DRILLS)}, 'short' or 'all'")
    parser.add_argument("--nproc", type=int, default=2, help="ranks (default: 2)")
    parser.add_argument("--backend", default="auto", help="collective backend (default: chosen by policy)")
    parser.add_argument("--device", default="auto", help="device type (default: detected accelerator, else cpu)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--share-device", dest="placement", action="store_const", const="shared")
    where.add_argument("--per-device", dest="placement", action="store_const", const="per-device")
    where.add_argument("--spread", dest="placement", action="store_const", const="spread")
    parser.set_defaults(placement="auto")
    parser.add_argument("--timeout", type=float, default=10.0, dest="timeout_s",
                        help="process-group timeout and ddplab's hang timeout, seconds (default: 10)")
    parser.add_argument("--victim", type=int, default=None, help="rank to inject the fault into (default: last)")
    parser.add_argument("--launcher", default="ddplab", help="kill_launcher: ddplab or torchrun (default: ddplab)")
    parser.add_argument("--run-dir", default=None, help="directory for the drill's runs")
    parser.add_argument("--json", metavar="PATH", help="write the JSON report here")


def names(text: str) -> list[str]:
    if text == "all":
        return list(drills.DRILLS)
    if text == "short":
        return list(SHORT_SET)
    return [drills.canonical(n) for n in text.split(",")]


def options(args):
    from ..drills.common import DrillOptions

    LaunchOptions(nproc=args.nproc, backend=args.backend, device=args.device, placement=args.placement,
                  timeout_s=args.timeout_s)  # the same range checks as every launch
    if args.nproc < 2:
        raise UsageError("drill-needs-ranks", f"--nproc {args.nproc}: a drill needs at least 2 ranks")
    victim = args.nproc - 1 if args.victim is None else args.victim
    if not 0 <= victim < args.nproc:
        raise UsageError("invalid-victim", f"--victim {victim} is not a rank of --nproc {args.nproc} "
                                           f"(valid: 0 to {args.nproc - 1})")
    if args.launcher not in LAUNCHERS:
        raise invalid_choice("launcher", args.launcher, LAUNCHERS)
    return DrillOptions(nproc=args.nproc, backend=args.backend, device=args.device, placement=args.placement,
                        timeout_s=args.timeout_s, victim=victim, launcher=args.launcher, run_dir=args.run_dir)


def validate(args) -> None:
    selected = names(args.name)
    opts = options(args)
    for name in selected:
        check_drill_dir(opts.run_dir, name)


def check_drill_dir(run_dir: str | None, name: str) -> None:
    """Each drill's runs go to <run-dir>/<drill>/: refuse one that already holds runs (exit 2)."""
    from ..files import check_output_dir

    if not run_dir:
        return
    drill_dir = Path(run_dir) / name
    check_output_dir(drill_dir, "--run-dir")
    if drill_dir.is_dir() and any(drill_dir.iterdir()):
        raise UsageError("run-dir-in-use", f"--run-dir {run_dir} already holds runs of drill {name} ({drill_dir}); "
                                           f"every run needs a directory of its own: give a new one")


def execute(selected: list[str], opts, console=None) -> dict:
    from dataclasses import asdict

    from .. import session

    platform, placement = session.prepare(opts.launch())  # refuse bad setups before the first drill
    outcomes = []
    for name in selected:
        if interrupts.requested():  # Ctrl+C/SIGTERM: the drills run so far make a partial report
            break
        if console is not None:
            console.rule(f"drill: {name}")
        run_opts = opts
        if opts.run_dir:
            from dataclasses import replace

            run_opts = replace(opts, run_dir=f"{opts.run_dir}/{name}")
        try:
            out = drills.get(name).run(run_opts, console)
        except Exception as exc:  # one broken drill must not hide the others' results (Ctrl+C is not one of them)
            out = {"drill": name, "verdict": "fail", "error": f"{type(exc).__name__}: {exc}", "leaked_pids": []}
        out["expect"] = drills.get(name).EXPECT
        outcomes.append(out)
        if console is not None:
            render_one(out, console)
    interrupted = bool(interrupts.requested())
    verdict = "fail" if interrupted else report.worst(o["verdict"] for o in outcomes)
    results = {"backend": placement.backend, "backend_reason": placement.backend_reason,
               "shared_device": placement.shared_device, "interrupted": interrupted, "drills": outcomes}
    return report.document("drill", asdict(opts) | {"drills": selected}, platform.to_dict(), results, verdict)


def render_one(o: dict, console) -> None:
    if o.get("error"):
        console.print(f"[red]drill {o['drill']} crashed:[/] {o['error']}")
        return
    inj = o.get("injected") or {}
    rows = [("injected", f"{inj.get('what')} (rank {inj.get('rank')})"),
            ("detected by", f"{o.get('detected_by')} after {o.get('detect_s')} s"),
            ("culprit (ddplab)", f"{o.get('culprit_ranks')}: {o.get('culprit_reason')}"),
            ("torchrun would blame", o.get("torchrun_root_cause_rank")),
            ("error excerpt", (o.get("error_excerpt") or "")[-300:]),
            ("leaked processes", o.get("leaked_pids")),
            ("device memory back after", f"{o.get('memory_back_s')} s" if o.get("device_mem_before_bytes") is not None
             else "not measured (no per-process memory API)")]
    for key in ("default_handling", "blocking_wait", "others_latency_us", "inflation", "operations",
                "orphans_after_kill", "cleaned", "report_written", "victim_error", "launcher_exit_code"):
        if key in o:
            rows.append((key.replace("_", " "), o[key]))
    console.print(display.kv_table(f"drill {o['drill']}", rows))
    console.print(f"verdict: {display.verdict_text(o['verdict'])} - expected: {o.get('expect', '')}")


def summary_line(results: dict) -> str:
    return ", ".join(f"{o['drill']} {o['verdict']}" + (f" ({o['detect_s']} s)" if o.get("detect_s") is not None else "")
                     for o in results["drills"])


def main(args, console) -> int:
    doc = execute(names(args.name), options(args), console)
    if args.json:  # before the verdict line: it is printed only once the report is stored
        report.write_json(doc, args.json)
    console.rule("drills")
    note = " (INTERRUPTED: partial report)" if doc["results"]["interrupted"] else ""
    console.print(f"verdict: {display.verdict_text(doc['verdict'])}{note} - {summary_line(doc['results'])}")
    return report.exit_code(doc["verdict"])
