"""What the supervisor costs a user's step: examples/healthy_mlp.py under plain torchrun and under `ddplab launch`,
alternating, several pairs; each run's median step time from rank 0, then the median over the pairs.

    python scripts/bench/launch_overhead.py [--nproc 2] [--steps 200] [--pairs 4] [--json out.json]

Issue 17's target: <= 1 % (median of 200 steps, 4 alternating pairs). A benchmark, not a test: the numbers go
to docs/RESULTS.md with the machine they came from.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULT = re.compile(r"RESULT (\{.*\})")


def median_ms(command: list[str], timeout_s: float) -> float | None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
    found = RESULT.search(done.stdout)
    if not found:
        print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
        return None
    return json.loads(found.group(1))["median_ms"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    script = ["examples/healthy_mlp.py", "--steps", str(args.steps)]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(args.nproc),
                *script]
    pairs = []
    with tempfile.TemporaryDirectory(prefix="ddplab-overhead-") as tmp:
        for i in range(args.pairs):
            plain = median_ms(torchrun, args.timeout)
            launch = [sys.executable, "-m", "ddplab", "launch", "--nproc-per-node", str(args.nproc), "--out",
                      f"{tmp}/launch-{i}", "--", *script]
            supervised = median_ms(launch, args.timeout)
            pairs.append({"torchrun_ms": plain, "ddplab_launch_ms": supervised})
            print(f"pair {i}: torchrun {plain} ms, ddplab launch {supervised} ms", flush=True)
    ok = [p for p in pairs if p["torchrun_ms"] and p["ddplab_launch_ms"]]
    summary = {"nproc": args.nproc, "steps": args.steps, "pairs": pairs, "when": time.strftime("%Y-%m-%d %H:%M"),
               "method": "rank 0's median step time of examples/healthy_mlp.py per run; median over pairs"}
    if ok:
        plain = statistics.median(p["torchrun_ms"] for p in ok)
        supervised = statistics.median(p["ddplab_launch_ms"] for p in ok)
        summary.update(torchrun_ms=plain, ddplab_launch_ms=supervised, overhead_pct=100 * (supervised - plain) / plain)
        print(f"median torchrun {plain:.4f} ms, ddplab launch {supervised:.4f} ms: "
              f"{summary['overhead_pct']:+.2f} %")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
