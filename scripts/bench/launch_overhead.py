"""What the supervisor costs a user's step: examples/healthy_mlp.py under plain torchrun and under `ddplab launch`,
alternating, several pairs; each run's median step time from rank 0, then the pairs' spread.

    python scripts/bench/launch_overhead.py [--nproc 2] [--steps 300] [--pairs 8] [--busy]
                                            [--ddplab-args=--no-stragglers] [--torchrun-env K=V ...] [--json out.json]

``--torchrun-env``: torchrun's ranks also get these variables, e.g. TORCH_FR_BUFFER_SIZE=2000 (the flight recorder
ddplab turns on), so that the pairs measure what the rest of ddplab costs.

``--busy``: the ranks keep every core of the host busy (each rank computes with cores / nproc threads,
OMP_NUM_THREADS, under both launchers), as CPU training, data loaders and tokenisers do: there a launcher's
thread takes its CPU from the ranks. Without it the two launchers' defaults apply (torchrun's OMP_NUM_THREADS=1 for
several ranks, which ddplab keeps).

The overhead of a pair is ddplab's median step over torchrun's, minus 1; the result is the median of the pairs'
overheads with their spread (min, max, and the middle half), so that an effect smaller than the spread reads as
such. Target (issue 31): <= 0.5 % with the straggler watch on. Ranks time-sliced on one GPU settle, run by run, on
one of two step times (about 1.4x apart), whoever launched them: the summary also gives the pairs whose two runs
ran at the same speed (within SAME_SPEED of each other) apart, and how many runs of each launcher took the slow one. A benchmark, not a test: the numbers go to
docs/RESULTS.md with the machine they came from.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
RESULT = re.compile(r"RESULT (\{.*\})")
SAME_SPEED = 0.15  # two runs at the same step mode differ by a few %; the modes of 3 ranks on one GPU by 40 %


def timed_run(command: list[str], timeout_s: float, env: dict[str, str]) -> tuple[float | None, float | None]:
    """Rank 0's median step (ms), and the launcher's own CPU (user + system, its ranks not counted) as a share of
    one core over the middle of the run (30 % to 90 % of its wall time: past both launchers' start, which imports
    torch, and before their teardown), read from /proc every 0.2 s."""
    samples = []  # (seconds since start, the launcher's CPU seconds)
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env)
        launcher, start = psutil.Process(proc.pid), time.monotonic()
        while proc.poll() is None and time.monotonic() - start < timeout_s:
            with contextlib.suppress(psutil.Error):
                cpu = launcher.cpu_times()
                samples.append((time.monotonic() - start, cpu.user + cpu.system))
            time.sleep(0.2)
        proc.kill()
        proc.wait()
        out.seek(0)
        text = out.read()
    found = RESULT.search(text)
    if not found:
        print(text[-4000:], file=sys.stderr)
        return None, None
    wall = samples[-1][0] if samples else 0
    middle = [s for s in samples if 0.3 * wall <= s[0] <= 0.9 * wall]
    share = (middle[-1][1] - middle[0][1]) / (middle[-1][0] - middle[0][0]) if len(middle) > 2 else None
    return json.loads(found.group(1))["median_ms"], share


def spread(values: list[float]) -> dict:
    ordered = sorted(values)
    quarter = max(0, len(ordered) // 4)
    return {"median": statistics.median(ordered), "min": ordered[0], "max": ordered[-1],
            "middle_half": [ordered[quarter], ordered[-1 - quarter]]}


def _variable(text: str) -> tuple[str, str]:
    """K=V for --torchrun-env; anything else is refused by argparse (exit 2) naming the value."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE (e.g. TORCH_FR_BUFFER_SIZE=2000)")
    return name, value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--busy", action="store_true", help="the ranks keep every core busy (OMP_NUM_THREADS)")
    parser.add_argument("--ddplab-args", default="", help="more options for ddplab launch, e.g. --no-stragglers")
    parser.add_argument("--torchrun-env", nargs="*", default=[], type=_variable, metavar="K=V",
                        help="more environment for torchrun")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    env = dict(os.environ)
    cores = os.cpu_count() or 1
    if args.busy:
        env["OMP_NUM_THREADS"] = str(max(1, cores // args.nproc))
    torchrun_env = {**env, **dict(args.torchrun_env)}
    script = ["examples/healthy_mlp.py", "--steps", str(args.steps)]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(args.nproc),
                *script]
    pairs = []
    with tempfile.TemporaryDirectory(prefix="ddplab-overhead-") as tmp:
        for i in range(args.pairs):
            launch = [sys.executable, "-m", "ddplab", "launch", "--nproc-per-node", str(args.nproc), "--out",
                      f"{tmp}/launch-{i}", *shlex.split(args.ddplab_args), "--", *script]
            # alternate which goes first: a machine warming up (or cooling down) favours neither
            order = [("torchrun_ms", torchrun, torchrun_env), ("ddplab_launch_ms", launch, env)]
            pair = {"load_before": os.getloadavg()[0]}
            for key, command, environ in (order if i % 2 == 0 else order[::-1]):
                pair[key], pair[key.replace("_ms", "_cpu_share")] = timed_run(command, args.timeout, environ)
            if pair["torchrun_ms"] and pair["ddplab_launch_ms"]:
                pair["overhead_pct"] = 100 * (pair["ddplab_launch_ms"] / pair["torchrun_ms"] - 1)
            pairs.append(pair)
            print(f"pair {i}: torchrun {pair['torchrun_ms']} ms, ddplab launch {pair['ddplab_launch_ms']} ms, "
                  f"{pair.get('overhead_pct', float('nan')):+.2f} %", flush=True)
    ok = [p for p in pairs if "overhead_pct" in p]
    summary = {"nproc": args.nproc, "steps": args.steps, "busy": args.busy, "cores": cores,
               "omp_num_threads": env.get("OMP_NUM_THREADS"), "ddplab_args": args.ddplab_args,
               "torchrun_env": [f"{k}={v}" for k, v in args.torchrun_env], "pairs": pairs,
               "when": time.strftime("%Y-%m-%d %H:%M"),
               "method": "rank 0's median step time of examples/healthy_mlp.py per run, torchrun and ddplab launch "
                         "alternating (each pair's first alternates); per pair ddplab / torchrun - 1; median of pairs"}
    if ok:
        summary["overhead_pct"] = spread([p["overhead_pct"] for p in ok])
        summary["torchrun_ms"] = spread([p["torchrun_ms"] for p in ok])
        summary["ddplab_launch_ms"] = spread([p["ddplab_launch_ms"] for p in ok])
        for key in ("torchrun_cpu_share", "ddplab_launch_cpu_share"):  # the launcher's own CPU, a share of a core
            shares = [p[key] for p in ok if p.get(key) is not None]
            summary[key] = spread(shares) if shares else None
        same = [p["overhead_pct"] for p in ok if abs(p["overhead_pct"]) < 100 * SAME_SPEED]
        summary["same_speed_pairs"] = len(same)
        if same:
            summary["same_speed_overhead_pct"] = spread(same)
        fastest = min(min(p["torchrun_ms"], p["ddplab_launch_ms"]) for p in ok)
        summary["slow_mode_runs"] = {key: sum(p[key] > fastest * (1 + SAME_SPEED) for p in ok)
                                     for key in ("torchrun_ms", "ddplab_launch_ms")}
        o = summary["overhead_pct"]
        print(f"overhead: median {o['median']:+.2f} % over {len(ok)} pairs (min {o['min']:+.2f}, max {o['max']:+.2f}, "
              f"middle half {o['middle_half'][0]:+.2f} .. {o['middle_half'][1]:+.2f}); median step torchrun "
              f"{summary['torchrun_ms']['median']:.3f} ms, ddplab {summary['ddplab_launch_ms']['median']:.3f} ms")
        if summary["torchrun_cpu_share"] and summary["ddplab_launch_cpu_share"]:
            print(f"launcher's own CPU, median share of a core mid-run: torchrun "
                  f"{100 * summary['torchrun_cpu_share']['median']:.2f} %, ddplab "
                  f"{100 * summary['ddplab_launch_cpu_share']['median']:.2f} %")
        if same and len(same) < len(ok):
            s = summary["same_speed_overhead_pct"]
            print(f"pairs at the same speed: {len(same)} of {len(ok)}, median {s['median']:+.2f} % (min {s['min']:+.2f}, "
                  f"max {s['max']:+.2f}); runs at the slow step: {summary['slow_mode_runs']}")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
