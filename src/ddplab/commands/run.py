"""`ddplab run`: the main job. The whole lab in one command.

env -> shared-device train -> per-device train (2+ devices) -> storm -> sweep ->
ceiling/contention -> drills -> leftover check -> report. Each stage is isolated: one
that fails or cannot run here is recorded and the next still runs; ranks that hang are
cut by ddplab's supervisor (--stage-deadline); Ctrl+C or SIGTERM stops the lab (the running
stage's ranks at once, interrupts.py), still writes a report marked interrupted and exits 130.
<out>/report.json and <out>/report.html hold everything; <out> is this run's alone.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from .. import checks, display, interrupts, report
from ..errors import DdplabError, ExitCode, invalid_choice
from ..files import DiskFull
from ..profiles import PROFILES, Stage, stages

SUMMARY = "the whole lab in one command: env, DDP, storm, sweep, ceiling, contention, drills, report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default="quick", help=f"one of {', '.join(PROFILES)} (default: quick)")
    parser.add_argument("--nproc", type=int, default=2, help="ranks for the shared-device stages (default: 2)")
    parser.add_argument("--device", default="auto", help="device type (default: detected accelerator, else cpu)")
    parser.add_argument("--stage-deadline", type=float, default=120.0,
                        help="seconds without progress before a stage's ranks are cut (default: 120)")
    parser.add_argument("--out", default=None,
                        help="output directory, new or empty (default: ./ddplab-runs/run-<time>-<id>)")
    parser.add_argument("--json", metavar="PATH", help="also write the JSON report here")


def validate(args) -> None:
    from ..config import MAX_TIMEOUT_S, LaunchOptions, check_number
    from ..platform import validate_device_request

    if args.profile not in PROFILES:
        raise invalid_choice("profile", args.profile, PROFILES)
    validate_device_request(args.device)
    check_number(args.stage_deadline, "--stage-deadline", 0, MAX_TIMEOUT_S, name="seconds", low_open=True)
    LaunchOptions(nproc=args.nproc, device=args.device, hang_timeout_s=args.stage_deadline)
    if args.out:
        check_out_dir(Path(args.out))


def check_out_dir(out: Path) -> None:
    """Refuse at once an --out that holds a run (one report would overwrite the other) or that
    ddplab could not write."""
    from ..files import check_output_dir
    from ..rundir import check_unused

    check_output_dir(out, "--out")
    check_unused(out, "--out")


def execute(args, console) -> dict:
    from . import env

    out = claim_out_dir(args.out)
    started = time.monotonic()
    records: list[dict] = []
    interrupted = False
    env_doc = _stage(records, Stage("env", "env"), console, lambda: env.execute(args.device))
    platform = (env_doc or {}).get("platform") or {}
    host_only = platform.get("device_type", "cpu") == "cpu"
    has_daemon = bool(platform.get("sharing_daemon")) and bool(platform.get("management_tool_path"))
    plan = stages(args.profile, args.nproc, platform.get("device_count", 1), host_only, has_daemon)
    for stage in plan[1:]:
        if interrupts.requested():  # Ctrl+C/SIGTERM between stages (or during env)
            break
        try:
            doc = _stage(records, stage, console, lambda s=stage: _run_command(s, args, out))
        except KeyboardInterrupt:  # a second Ctrl+C: the stage was cut short
            interrupted = True
            records.append({"name": stage.name, "verdict": "fail", "summary": "interrupted by the user"})
            break
        if doc and doc["results"].get("interrupted"):  # its ranks, or its drills, were stopped
            interrupted = True
            break
    records.append(_leftover_check(records))
    interrupted = interrupted or bool(interrupts.requested())
    rows = [r for rec in records for r in checks.for_stage(rec)]
    verdict = report.worst(s["verdict"] for s in records if s["verdict"] != "skip")
    results = {"profile": args.profile, "stages": records, "checks": rows, "interrupted": interrupted,
               "duration_s": round(time.monotonic() - started, 1), "out": str(out.resolve())}
    config = {"profile": args.profile, "nproc": args.nproc, "device": args.device, "out": str(out),
              "stage_deadline_s": args.stage_deadline, "stages": [s.__dict__ for s in plan]}
    doc = report.document("run", config, platform or None, results, verdict)
    write_reports(doc, out)
    return doc


def claim_out_dir(out: str | None) -> Path:
    """This run's own output directory: --out (refused if it holds a run), else a new one whose name
    carries a unique suffix: two runs started in the same second once shared one, and lost a report."""
    from ..rundir import DEFAULT_RUNS_DIR, claim_directory, new_run_id

    run_id = new_run_id("run")
    path = Path(out) if out else Path(DEFAULT_RUNS_DIR) / run_id
    claim_directory(path, run_id, "--out")
    return path


def write_reports(doc: dict, out: Path) -> None:
    from ..files import write_text_atomic
    from ..html_report import render_html

    report.write_json(doc, out / "report.json")
    write_text_atomic(out / "report.html", render_html(doc))


def _run_command(stage: Stage, args, out: Path) -> dict:
    """Parse the stage's command line with the command's own parser, validate, execute."""
    from .. import commands

    module = commands.load(stage.command)
    parser = argparse.ArgumentParser(prog=f"ddplab {stage.command}")
    module.add_arguments(parser)
    argv = list(stage.argv) + ["--device", args.device]
    if "--run-dir" in {a.option_strings[0] for a in parser._actions if a.option_strings}:
        argv += ["--run-dir", str(out / stage.name)]
    if any("--hang-timeout" in a.option_strings for a in parser._actions):
        argv += ["--hang-timeout", str(args.stage_deadline)]
    stage_args = parser.parse_args(argv)
    module.validate(stage_args)
    call = _STAGE_CALLS.get(stage.command, lambda m, a: m.execute(a, None, live=False))
    return call(module, stage_args)


# Commands whose library entry point takes more than the parsed arguments.
_STAGE_CALLS = {
    "env": lambda m, a: m.execute(a.device),
    "train": lambda m, a: m.execute(m.config_from_args(a), None, live=False),
    "drill": lambda m, a: m.execute(m.names(a.name), m.options(a)),
}


def _stage(records: list, stage: Stage, console, run) -> dict | None:
    console.rule(f"stage: {stage.name}  (ddplab {stage.command} {' '.join(stage.argv)})")
    started = time.monotonic()
    record = {"name": stage.name, "command": f"ddplab {stage.command} {' '.join(stage.argv)}".strip()}
    try:
        doc = run()
    except KeyboardInterrupt:
        raise
    except DdplabError as exc:  # this machine cannot run the stage: record it, go on
        cannot_run_here = exc.exit_code == ExitCode.ENVIRONMENT and not isinstance(exc, DiskFull)
        records.append({**record, "verdict": "skip" if cannot_run_here else "fail", "summary": exc.message,
                        "error": exc.reference, "duration_s": round(time.monotonic() - started, 2)})
        console.print(f"[yellow]{stage.name}:[/] {exc.message}")
        return None
    except Exception as exc:  # a bug in one stage must not hide the others' results
        records.append({**record, "verdict": "fail", "summary": f"{type(exc).__name__}: {exc}",
                        "error": "stage-crashed", "duration_s": round(time.monotonic() - started, 2)})
        console.print(f"[red]stage {stage.name} crashed:[/] {type(exc).__name__}: {exc}")
        return None
    summary = _summary(doc)
    records.append({**record, "verdict": doc["verdict"], "summary": summary,
                    "duration_s": round(time.monotonic() - started, 2), "report": doc})
    console.print(f"{display.verdict_text(doc['verdict'])} {stage.name}: {summary} "
                  f"({time.monotonic() - started:.1f} s)")
    return doc


def _summary(doc: dict) -> str:
    from .. import commands

    module = commands.load(doc["command"])
    if hasattr(module, "summary_line"):
        return module.summary_line(doc["results"])
    if doc["command"] == "env":
        p = doc["platform"]
        return f"{p['device_type']} ({p['vendor']}), {p['device_count']} device(s), torch {p['torch_version']}"
    return doc["verdict"]


def _leftover_check(records: list[dict]) -> dict:
    """After every stage: nothing that this run's stages started (their run ids) is still alive.
    Orphans of other runs on the machine are shown as information: they are not this run's doing."""
    from ..drills.common import leaked
    from ..procs import survey

    run_ids = _run_ids(records)
    left = sorted({p for rid in run_ids for p in leaked(rid, [])})
    orphans = survey().orphans
    ours = [o.to_dict() for o in orphans if o.run_id in run_ids]
    others = [o.to_dict() for o in orphans if o.run_id not in run_ids]
    summary = f"{len(left)} process(es) of this lab and {len(ours)} orphan(s) of this lab left"
    if others:
        summary += f"; {len(others)} orphan(s) of other runs on this machine, not counted (`ddplab clean`)"
    return {"name": "leftovers", "command": "(ddplab run)", "verdict": "pass" if not left and not ours else "fail",
            "summary": summary, "left_pids": left, "orphans": ours, "other_orphans": others}


def _run_ids(records: list[dict]) -> set[str]:
    """The run ids this lab's stages started: each stage's own and each drill's (its ddplab session,
    or the child launcher / torchrun it started). Not every "run_id" in the JSON: the env stage lists
    orphans of other runs with theirs."""
    found = set()
    for rec in records:
        results = (rec.get("report") or {}).get("results") or {}
        found.add(results.get("run_id"))
        for drill in results.get("drills") or []:
            found.add(drill.get("run_id"))
            found.add((drill.get("session") or {}).get("run_id"))
    return {rid for rid in found if isinstance(rid, str) and rid}


def main(args, console) -> int:
    doc = execute(args, console)
    if args.json:  # before the verdict: it is printed only once every report is stored
        report.write_json(doc, args.json)
    console.rule("verdict")
    console.print(display.check_table(f"ddplab run --profile {args.profile}", doc["results"]["checks"]))
    note = " (INTERRUPTED: partial report)" if doc["results"]["interrupted"] else ""
    console.print(f"verdict: {display.verdict_text(doc['verdict'])}{note} in {doc['results']['duration_s']} s; "
                  f"report: {doc['results']['out']}/report.html")
    if doc["results"]["interrupted"]:
        return ExitCode.INTERRUPTED
    return report.exit_code(doc["verdict"])

