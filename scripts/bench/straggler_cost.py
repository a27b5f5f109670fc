"""What the straggler watch costs a training step: the drills' DDP training (drills/script.py) under `ddplab launch`
with the watch (its default) and with --no-stragglers, alternating, several pairs; each run's step is rank 0's
training loop over its steps (interval sleep included), the pair's cost the difference.

    python scripts/bench/straggler_cost.py [--nproc 2] [--seconds 40] [--pairs 5] [--every S] [--json out.json]

--every S makes the ranks read their recorders every S seconds whatever a read costs (the watch's own budget
slows them to at most 0.25 % of a rank's time otherwise): a stress run, whose cost per read scales down to the
cadence the watch really keeps. Also reported: each rank's own measure of a read (the dump and its decoding), and
the load average before each run. A benchmark, not a test: the numbers go to docs/RESULTS.md with the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def one_run(out: Path, nproc: int, seconds: float, watched: bool, every: float | None) -> dict:
    command = [sys.executable, "-m", "ddplab", "launch", "--nproc-per-node", str(nproc), "--out", str(out),
               *([] if watched else ["--no-stragglers"]), "-m", "--", "ddplab.drills.script", "--steps",
               "100000000", "--seconds", str(seconds)]
    env = dict(os.environ)
    if watched and every:
        env.update({"DDPLAB_ARRIVALS": str(every), "DDPLAB_ARRIVALS_BUDGET": "1"})
    load = os.getloadavg()[0]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=seconds + 240, env=env)
    row = {"watched": watched, "exit": done.returncode, "load_before": round(load, 2)}
    try:
        result = json.loads((out / "ranks" / "0" / "drill-result.json").read_text())
        report = json.loads((out / "report.json").read_text())["results"]
    except (OSError, ValueError):
        return {**row, "error": (done.stdout + done.stderr)[-1500:]}
    steps = len(result["latencies_us"])
    row.update(steps=steps, step_ms=1000 * result["loop_s"] / steps)
    found = report.get("stragglers") or {}
    if watched:
        reads = [json.loads(f.read_text()) for f in sorted(out.glob("ranks/*/arrivals.json"))]
        row.update(every_s=found.get("every_s"), read_cost_ms=[round(1000 * r["read_cost_s"], 1) for r in reads],
                   named=[f["rank"] for f in found.get("findings") or []])
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--every", type=float, default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    pairs = []
    with tempfile.TemporaryDirectory(prefix="ddplab-straggler-cost-") as tmp:
        for i in range(args.pairs):
            order = (True, False) if i % 2 == 0 else (False, True)  # alternate which goes first
            runs = {w: one_run(Path(tmp) / f"{i}-{w}", args.nproc, args.seconds, w, args.every) for w in order}
            on, off = runs[True], runs[False]
            cost = (on["step_ms"] / off["step_ms"] - 1) if on.get("step_ms") and off.get("step_ms") else None
            pairs.append({"watched": on, "not_watched": off, "cost": cost})
            print(f"pair {i}: watched {on.get('step_ms', 0):.3f} ms, not watched {off.get('step_ms', 0):.3f} ms, "
                  f"cost {100 * cost if cost is not None else float('nan'):+.2f} % (loads {on['load_before']}, "
                  f"{off['load_before']}; reads every {on.get('every_s')} s, {on.get('read_cost_ms')} ms)", flush=True)
    costs = [p["cost"] for p in pairs if p["cost"] is not None]
    summary = {"nproc": args.nproc, "seconds": args.seconds, "every": args.every, "pairs": pairs,
               "when": time.strftime("%Y-%m-%d %H:%M"), "torch": _torch(),
               "method": "rank 0's training loop per step (drills/script.py, interval 10 ms), watched vs "
                         "--no-stragglers, alternating order; cost = watched / not watched - 1 per pair"}
    if costs:
        summary.update(median_cost=statistics.median(costs), min_cost=min(costs), max_cost=max(costs))
        print(f"cost per step: median {100 * summary['median_cost']:+.2f} %, pairs from {100 * min(costs):+.2f} % to "
              f"{100 * max(costs):+.2f} %")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    return 0


def _torch() -> str | None:
    try:
        from importlib.metadata import version
        return version("torch")
    except Exception:  # noqa: BLE001
        return None


if __name__ == "__main__":
    sys.exit(main())
