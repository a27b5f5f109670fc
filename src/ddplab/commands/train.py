"""`ddplab train`: the report's DDP experiment, run for real through elastic.

N ranks on one device (pseudo-DDP, each with an allocator cap) or one per device;
the placement policy picks the backend and says why. Proves synchronisation
(gradient vs single-process reference, bit-identical parameters), reports step time
p50/p99 and per-rank memory, and samples each rank every 0.5 s while it runs.
"""

from __future__ import annotations

import argparse
import statistics

from .. import display, report
from ..config import MODELS, LaunchOptions, TrainConfig
from ..workloads.ddp_train import TIMING_METHOD

SUMMARY = "run DDP with N ranks (shared device or one per device) and prove gradients were synchronised"


def add_launch_arguments(parser: argparse.ArgumentParser, nproc_default: int = 2) -> None:
    """Options every multi-rank command shares."""
    parser.add_argument("--nproc", type=int, default=nproc_default, help="ranks on this node (default: %(default)s)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--share-device", dest="placement", action="store_const", const="shared",
                       help="every rank on device 0 with a memory cap (default when nproc > devices)")
    where.add_argument("--per-device", dest="placement", action="store_const", const="per-device",
                       help="rank i on device i")
    parser.set_defaults(placement="auto")
    parser.add_argument("--backend", default="auto", help="collective backend (default: chosen by policy)")
    parser.add_argument("--device", default="auto", help="device type (default: detected accelerator, else cpu)")
    parser.add_argument("--memory-fraction", type=float, default=None,
                        help="allocator cap per rank on a shared device (default: (1 - reserve) / ranks)")
    parser.add_argument("--reserve", type=float, default=0.10,
                        help="device memory left for contexts and buffers (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=120.0, dest="timeout_s",
                        help="process-group timeout in seconds (default: %(default)s)")
    parser.add_argument("--run-dir", default=None, help="directory for logs and results (default: ./ddplab-runs/ID)")
    parser.add_argument("--json", metavar="PATH", help="write the JSON report here")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_launch_arguments(parser)
    parser.add_argument("--steps", type=int, default=20, help="training steps (default: %(default)s)")
    parser.add_argument("--model", default="linear", help=f"one of {', '.join(MODELS)} (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=20, help="samples per rank per step (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check-every", type=int, default=1,
                        help="compare with the reference gradient every N steps (default: %(default)s)")


def launch_options(args) -> LaunchOptions:
    return LaunchOptions(nproc=args.nproc, placement=args.placement, backend=args.backend, device=args.device,
                         memory_fraction=args.memory_fraction, reserve=args.reserve, timeout_s=args.timeout_s,
                         run_dir=args.run_dir)


def config_from_args(args) -> TrainConfig:
    return TrainConfig(launch=launch_options(args), steps=args.steps, model=args.model,
                       batch_size=args.batch_size, seed=args.seed, check_every=args.check_every)


def validate(args) -> None:
    config_from_args(args)


def execute(cfg: TrainConfig, console=None, live: bool = True) -> dict:
    """Plan, launch, sample, aggregate. Raises DdplabError before starting anything."""
    from ..launch import RunDir, launch
    from ..platform import detect, open_monitor
    from ..policy import plan
    from ..sampler import RankSampler
    from ..worker import rank_main

    platform = detect(cfg.launch.device, with_memory=False)
    placement = plan(cfg.launch, platform)
    run = RunDir.create(cfg.launch.run_dir, "train")
    if console is not None:
        _announce(console, placement, cfg, run)

    job = {
        "workload": "ddp_train",
        "placement": placement.to_dict(),
        "platform_backend": platform.backend,
        "timeout_s": cfg.launch.timeout_s,
        "train": {"steps": cfg.steps, "model": cfg.model, "batch_size": cfg.batch_size, "seed": cfg.seed,
                  "check_every": cfg.check_every},
    }
    monitor = open_monitor(platform.spec)
    try:
        with _live_view(console if live else None) as update, \
                RankSampler(run, monitor, on_sample=update) as sampler:
            outcome = launch(rank_main, job, cfg.launch.nproc, run)
    finally:
        monitor.close()

    results = aggregate(outcome, placement, sampler, run.rank_pids())
    doc = report.document("train", cfg.to_dict(), platform.to_dict(), results, train_verdict(results))
    return doc


def aggregate(outcome, placement, sampler, rank_pids: dict[int, int]) -> dict:
    peaks = sampler.peaks()
    ranks = []
    for rank in range(len(placement.device_indices)):  # every rank, whether it finished or not
        value = outcome.return_values.get(rank)
        failure = outcome.failures.get(rank)
        device = placement.device_label(rank)
        entry = {"rank": rank, "pid": (value or {}).get("pid") or (failure.pid if failure else rank_pids.get(rank)),
                 "device": device, "peak_mem_bytes": (value or {}).get("peak_mem_bytes"),
                 "status": "finished" if value else ("failed" if failure else "stopped by launcher")}
        entry.update(peaks.get(rank, {}))
        if value:
            entry.update({k: v for k, v in value.items() if k not in entry})
        if failure:
            entry["failure"] = {"exitcode": failure.exitcode, "signal": failure.signal,
                                "message": failure.message[-1500:], "log_tail": failure.log_tail}
        ranks.append(entry)

    values = list(outcome.return_values.values())
    completed = outcome.ok and bool(values)
    step_times = [t for v in values for t in v["step_times_us"]]
    messages = " ".join(f.message + f.log_tail for f in outcome.failures.values())
    refusal = placement.expected_failure
    return {
        "backend": placement.backend,
        "backend_reason": placement.backend_reason,
        "shared_device": placement.shared_device,
        "placement": placement.to_dict(),
        "warnings": list(placement.warnings),
        "run_id": outcome.run_id,
        "run_dir": outcome.run_dir,
        "world_size": len(ranks),
        "completed": completed,
        "params_identical": (len({v["params_sha256"] for v in values}) == 1) if completed else None,
        "grad_matches_reference": all(v["grad_matches_reference"] for v in values) if completed else None,
        "local_grad_differs": (all(v["local_grad_differs"] for v in values)
                               if completed and len(values) > 1 else None),
        "step_time_us": _stats(step_times),
        "step_time_method": TIMING_METHOD,
        "ranks": ranks,
        "torchrun_root_cause_rank": outcome.torchrun_root_cause_rank,
        "launcher_error": outcome.launcher_error,
        "expected_failure": refusal,
        "expected_failure_observed": (_refusal_seen(refusal, messages) if refusal and not completed else None),
        "duration_s": round(outcome.duration_s, 3),
        "timeseries": sampler.timeseries(),
    }


def train_verdict(results: dict) -> str:
    proven = (results["completed"] and results["params_identical"] and results["grad_matches_reference"]
              and results["local_grad_differs"] is not False)
    if not proven:
        return "fail"
    return "warn" if results["warnings"] else "pass"


def summary_line(results: dict) -> str:
    if not results["completed"]:
        why = results.get("launcher_error") or next(
            (r["failure"]["message"].strip().splitlines()[-1] for r in results["ranks"]
             if r.get("failure") and r["failure"]["message"].strip()), "a rank failed")
        if results.get("expected_failure_observed"):
            why = f"failed as expected: {results['expected_failure']}"
        return f"{results['backend']}: {why}"
    st = results["step_time_us"]
    return (f"{results['backend']}, {results['world_size']} ranks, "
            f"{'shared device' if results['shared_device'] else 'one per device'}: params identical="
            f"{results['params_identical']}, grad matches reference={results['grad_matches_reference']}, "
            f"step p50 {st['p50']:.0f} us / p99 {st['p99']:.0f} us")


def render(doc: dict, console) -> None:
    r = doc["results"]
    console.print(display.rank_table("Ranks", r["ranks"]))
    for rank in r["ranks"]:
        if rank.get("failure"):
            f = rank["failure"]
            console.print(f"[red]rank {rank['rank']} failed[/] (exit {f['exitcode']}, {f['signal'] or 'no signal'}): "
                          f"{f['message'].strip()[-600:]}")
    if r["torchrun_root_cause_rank"] is not None:
        console.print(f"torchrun would name rank {r['torchrun_root_cause_rank']} as root cause (first to fail)")
    rows = [("backend", f"{r['backend']}: {r['backend_reason']}"),
            ("shared device", r["shared_device"]),
            ("parameters bit-identical across ranks", r["params_identical"]),
            ("averaged gradient == single-process reference", r["grad_matches_reference"]),
            ("local gradient differs (negative control)", r["local_grad_differs"])]
    st = r["step_time_us"]
    if st["n"]:
        rows.append(("step time", f"p50 {st['p50']:.1f} us, p99 {st['p99']:.1f} us over {st['n']} steps "
                                  f"({r['step_time_method']})"))
    rows.append(("run directory", r["run_dir"]))
    console.print(display.kv_table("DDP train", rows))
    for w in r["warnings"]:
        console.print(f"[yellow]warning:[/] {w}")
    console.print(f"verdict: {display.verdict_text(doc['verdict'])} - {summary_line(r)}")


def main(args, console) -> int:
    doc = execute(config_from_args(args), console)
    render(doc, console)
    if args.json:
        report.write_json(doc, args.json)
    return report.exit_code(doc["verdict"])


def _stats(values: list[float]) -> dict:
    if not values:
        return {"n": 0, "p50": None, "p99": None, "mean": None, "min": None, "max": None}
    return {"n": len(values), "p50": report.percentile(values, 50), "p99": report.percentile(values, 99),
            "mean": statistics.fmean(values), "min": min(values), "max": max(values)}


def _refusal_seen(refusal: str, messages: str) -> bool:
    quoted = refusal.split('"')[1] if '"' in refusal else refusal
    return quoted.lower() in messages.lower()


def _announce(console, placement, cfg, run) -> None:
    where = "all on device 0" if placement.shared_device else "one per device"
    cap = (f", allocator cap {placement.memory_fraction:.3f} per rank"
           + ("" if placement.memory_fraction_enforced else " (not enforced on the host)")
           if placement.memory_fraction is not None else "")
    console.print(f"ddplab train: {cfg.launch.nproc} ranks {where}{cap}; backend [bold]{placement.backend}[/]: "
                  f"{placement.backend_reason}")
    for w in placement.warnings:
        console.print(f"[yellow]warning:[/] {w}")
    console.print(f"run {run.run_id} -> {run.path}")


class _live_view:
    """Live per-rank table while ranks run (terminal only); yields the sampler's callback."""

    def __init__(self, console):
        self.console = console if console is not None and console.is_terminal else None
        self.live = None

    def __enter__(self):
        if self.console is None:
            return None
        from rich.live import Live

        self.live = Live(display.rank_table("Ranks (live, every 0.5 s)", []), console=self.console,
                         refresh_per_second=4, transient=True)
        self.live.__enter__()
        return lambda sample: self.live.update(display.rank_table("Ranks (live, every 0.5 s)", sample["ranks"]))

    def __exit__(self, *exc):
        if self.live is not None:
            self.live.__exit__(*exc)
