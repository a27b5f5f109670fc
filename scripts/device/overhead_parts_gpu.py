"""Where `ddplab launch`'s step-time cost on one GPU comes from: examples/healthy_mlp.py under five setups,
one run of each per round, the order rotated every round, rank 0's median step of each run:

  torchrun             plain torchrun
  torchrun_timing      plain torchrun with TORCH_NCCL_ENABLE_TIMING=1 (what the straggler watch asks of the ranks)
  launch               ddplab launch as users run it
  launch_no_stragglers ddplab launch --no-stragglers (no timing asked for, no recorder reads)
  launch_timing0       ddplab launch with the user's TORCH_NCCL_ENABLE_TIMING=0 (the watch reads enqueue times only)

    python scripts/device/overhead_parts_gpu.py [--nproc 1] [--rounds 4] [--steps 1000] --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from launch_overhead import median_ms  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    script = ["examples/healthy_mlp.py", "--steps", str(args.steps)]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(args.nproc),
                *script]
    base = dict(os.environ)
    base.pop("TORCH_NCCL_ENABLE_TIMING", None)
    results: dict[str, list] = {}
    with tempfile.TemporaryDirectory(prefix="ddplab-parts-") as tmp:
        def launch(tag: str, *extra: str) -> list[str]:
            return [sys.executable, "-m", "ddplab", "launch", "--nproc-per-node", str(args.nproc), "--out",
                    f"{tmp}/{tag}", *extra, "--", *script]
        for i in range(args.rounds):
            setups = [("torchrun", torchrun, {}),
                      ("torchrun_timing", torchrun, {"TORCH_NCCL_ENABLE_TIMING": "1"}),
                      ("launch", launch(f"{i}-default"), {}),
                      ("launch_no_stragglers", launch(f"{i}-no-stragglers", "--no-stragglers"), {}),
                      ("launch_timing0", launch(f"{i}-timing0"), {"TORCH_NCCL_ENABLE_TIMING": "0"})]
            setups = setups[i % len(setups):] + setups[:i % len(setups)]
            for name, command, extra_env in setups:
                ms = median_ms(command, args.timeout, {**base, **extra_env})
                results.setdefault(name, []).append(ms)
                print(f"round {i} {name}: {ms} ms", flush=True)
                Path(args.json).write_text(json.dumps({"partial": True, "runs_ms": results}))  # a timeout keeps them
    summary = {"nproc": args.nproc, "steps": args.steps, "rounds": args.rounds, "runs_ms": results,
               "when": time.strftime("%Y-%m-%d %H:%M"),
               "method": "rank 0's median step of examples/healthy_mlp.py per run; one run per setup per round, "
                         "order rotated; per setup the median of its runs, against torchrun's"}
    ok = [m for m in results.get("torchrun", []) if m]
    base_ms = statistics.median(ok) if ok else None
    for name, runs in results.items():
        good = [m for m in runs if m]
        if good and base_ms:
            med = statistics.median(good)
            summary.setdefault("median_ms", {})[name] = med
            summary.setdefault("vs_torchrun_pct", {})[name] = 100 * (med / base_ms - 1)
            print(f"{name:<22} median {med:.4f} ms over {len(good)} runs ({min(good):.4f}..{max(good):.4f}), "
                  f"{100 * (med / base_ms - 1):+.2f} % vs torchrun", flush=True)
    Path(args.json).write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
