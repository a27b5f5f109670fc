"""`ddplab run`: the main job. Runs the lab's stages in order and prints a verdict table.

Stages now: env -> train on a shared device -> train one rank per device (when
there are two or more devices). Each stage is isolated: one that fails or cannot
run on this machine is recorded and the next one still runs. Everything lands in
one directory: <out>/report.json plus each stage's run directory.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from .. import display, report
from ..config import MODELS, LaunchOptions, TrainConfig
from ..errors import DdplabError, UsageError

SUMMARY = "the whole lab in one command: env, pseudo-DDP on one device, DDP one rank per device"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nproc", type=int, default=2, help="ranks for the shared-device stage (default: 2)")
    parser.add_argument("--steps", type=int, default=20, help="training steps per stage (default: 20)")
    parser.add_argument("--model", default="linear", help=f"one of {', '.join(MODELS)} (default: linear)")
    parser.add_argument("--device", default="auto", help="device type (default: detected accelerator, else cpu)")
    parser.add_argument("--out", default=None, help="output directory (default: ./ddplab-runs/run-<time>)")
    parser.add_argument("--json", metavar="PATH", help="also write the JSON report here")


def _train_config(args, placement: str, nproc: int, run_dir: Path) -> TrainConfig:
    return TrainConfig(launch=LaunchOptions(nproc=nproc, placement=placement, device=args.device,
                                            run_dir=str(run_dir)),
                       steps=args.steps, model=args.model)


def validate(args) -> None:
    from ..platform import validate_device_request

    validate_device_request(args.device)
    _train_config(args, "shared", args.nproc, Path("."))


def execute(args, console) -> dict:
    from . import env, train

    out = Path(args.out or f"ddplab-runs/run-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    stages: list[dict] = []

    env_doc = _stage(stages, "env", console, lambda: env.execute(args.device), _env_summary, env.render)
    platform = (env_doc or {}).get("platform") or {}

    def train_stage(name: str, placement: str, nproc: int):
        cfg = _train_config(args, placement, nproc, out / name)
        _stage(stages, name, console, lambda: train.execute(cfg, console),
               lambda d: train.summary_line(d["results"]), train.render)

    train_stage("train-shared", "shared", args.nproc)
    devices = platform.get("device_count", 0)
    if platform and not platform.get("device_type") == "cpu" and devices >= 2:
        train_stage("train-per-device", "per-device", devices)
    else:
        stages.append({"name": "train-per-device", "verdict": "skip",
                       "summary": f"needs 2 or more accelerator devices; found {devices}"})

    verdict = report.worst(s["verdict"] for s in stages)
    doc = report.document("run", {"nproc": args.nproc, "steps": args.steps, "model": args.model,
                                  "device": args.device, "out": str(out)},
                          platform or None, {"stages": stages, "out": str(out.resolve())}, verdict)
    report.write_json(doc, out / "report.json")
    return doc


def _stage(stages: list, name: str, console, run, summarise, render) -> dict | None:
    console.rule(f"stage: {name}")
    started = time.monotonic()
    try:
        doc = run()
    except UsageError:
        raise
    except DdplabError as exc:  # this machine cannot run the stage: record it, go on
        stages.append({"name": name, "verdict": "fail", "summary": exc.message,
                       "error": exc.reference, "duration_s": round(time.monotonic() - started, 2)})
        console.print(exc.render())
        return None
    except Exception as exc:  # a bug in one stage must not hide the others' results
        stages.append({"name": name, "verdict": "fail", "summary": f"{type(exc).__name__}: {exc}",
                       "error": "stage-crashed", "duration_s": round(time.monotonic() - started, 2)})
        console.print(f"[red]stage {name} crashed:[/] {type(exc).__name__}: {exc}")
        return None
    stages.append({"name": name, "verdict": doc["verdict"], "summary": summarise(doc),
                   "duration_s": round(time.monotonic() - started, 2), "report": doc})
    render(doc, console)
    return doc


def _env_summary(doc: dict) -> str:
    p, r = doc["platform"], doc["results"]
    shared = r["shared_device"]
    text = (f"{p['device_type']} ({p['vendor']}), {p['device_count']} device(s), torch {p['torch_version']}; "
            f"shared device: {shared.get('backend', 'none')}")
    if r["orphans"]:
        text += f"; {len(r['orphans'])} orphaned process(es)"
    return text


def main(args, console) -> int:
    doc = execute(args, console)
    console.rule("verdict")
    console.print(display.stage_table("ddplab run", doc["results"]["stages"]))
    console.print(f"verdict: {display.verdict_text(doc['verdict'])}; report: {doc['results']['out']}/report.json")
    if args.json:
        report.write_json(doc, args.json)
    return report.exit_code(doc["verdict"])
