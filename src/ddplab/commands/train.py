"""`ddplab train`: the report's DDP experiment, run for real through elastic.

N ranks on one device (pseudo-DDP, each with an allocator cap) or one per device;
the placement policy picks the backend and says why. Proves synchronisation
(gradient vs single-process reference, bit-identical parameters), reports step time
p50/p99 and per-rank memory, and samples each rank every 0.5 s while it runs.
"""

from __future__ import annotations

import argparse

from .. import display, report
from ..config import MODELS, TrainConfig
from . import options
from ..workloads.common import distribution
from ..workloads.ddp_train import TIMING_METHOD

SUMMARY = "run DDP with N ranks (shared device or one per device) and prove gradients were synchronised"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_launch_arguments(parser)
    parser.add_argument("--steps", type=int, default=20, help="training steps (default: %(default)s)")
    parser.add_argument("--model", default="linear", help=f"one of {', '.join(MODELS)} (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=20, help="samples per rank per step (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check-every", type=int, default=1,
                        help="compare with the reference gradient every N steps (default: %(default)s)")


def config_from_args(args) -> TrainConfig:
    return TrainConfig(launch=options.launch_options(args), steps=args.steps, model=args.model,
                       batch_size=args.batch_size, seed=args.seed, check_every=args.check_every)


def validate(args) -> None:
    config_from_args(args)


def execute(cfg: TrainConfig, console=None, live: bool = True) -> dict:
    """Plan, launch, sample, aggregate. Raises DdplabError before starting anything."""
    from .. import session

    payload = {"steps": cfg.steps, "model": cfg.model, "batch_size": cfg.batch_size, "seed": cfg.seed,
               "check_every": cfg.check_every}
    prepared = session.prepare(cfg.launch, with_memory=True)
    options.require_fits(*prepared, memory_per_rank(cfg), f"--batch-size {cfg.batch_size} with --model {cfg.model}",
                         "batch-too-large", hint="lower --batch-size")
    s = session.run_workload("ddp_train", payload, cfg.launch, "train", console, live, prepared=prepared)
    results = aggregate(s)
    return report.document("train", cfg.to_dict(), s.platform.to_dict(), results, train_verdict(results))


def memory_per_rank(cfg: TrainConfig) -> int:
    """A floor on the bytes one rank holds (workloads/ddp_train.py): every rank rebuilds all
    ranks' batches on the host, copies them to its device and concatenates them for the
    reference gradient, whose forward pass keeps each layer's output for the backward."""
    world = cfg.launch.nproc * cfg.launch.nnodes
    features, activations = {"linear": (10, 2 * 10), "mlp": (1024, 7 * 1024)}[cfg.model]
    return world * cfg.batch_size * 4 * (3 * features + activations)


def aggregate(s) -> dict:
    """Train's results: the common part plus the synchronisation proofs and step times."""
    results = s.common_results()
    values = s.rank_values()
    completed = results["completed"]
    results.update({
        # every rank's digest as gathered by each rank: covers ranks on other machines too
        "params_identical": (len({d for v in values for d in v["all_params_sha256"]}) == 1) if completed else None,
        "grad_matches_reference": all(v["grad_matches_reference"] for v in values) if completed else None,
        "local_grad_differs": (all(v["local_grad_differs"] for v in values)
                               if completed and results["world_size"] > 1 else None),
        "step_time_us": distribution([t for v in values for t in v["step_times_us"]]),
        "step_time_method": TIMING_METHOD,
    })
    return results


def train_verdict(results: dict) -> str:
    proven = (results["completed"] and results["params_identical"] and results["grad_matches_reference"]
              and results["local_grad_differs"] is not False)
    if not proven:
        return "fail"
    return "warn" if results["warnings"] else "pass"


def summary_line(results: dict) -> str:
    if not results["completed"]:
        return f"{results['backend']}: {display.failure_reason(results)}"
    st = results["step_time_us"]
    return (f"{results['backend']}, {results['world_size']} ranks, "
            f"{'shared device' if results['shared_device'] else 'one per device'}: params identical="
            f"{results['params_identical']}, grad matches reference={results['grad_matches_reference']}, "
            f"step p50 {st['p50']:.0f} us / p99 {st['p99']:.0f} us")


def render(doc: dict, console) -> None:
    r = doc["results"]
    console.print(display.rank_table("Ranks", r["ranks"]))
    display.failures(r, console)
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
    display.footer(console, r, doc["verdict"], summary_line(r))


def main(args, console) -> int:
    return display.finish(execute(config_from_args(args), console), render, args.json, console)
