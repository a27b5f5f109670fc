"""What torch's flight recorder costs per collective, the buffer `ddplab launch` switches on (2,000 entries)
against none: one gloo rank (world size 1, so the wire costs nothing and only the per-call work shows),
small all_reduces, both settings alternating in fresh processes.

    python scripts/bench/flight_recorder_cost.py [--rounds 3] [--calls 20000] [--json out.json]

Each process times `--calls` back-to-back 4-byte all_reduces five times and keeps the fastest pass (the
least disturbed by other work on the machine); the summary is the median of those over the rounds.
Recorded in docs/RESULTS.md ("Issues 9-14, final round": launch overhead).
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

SETTINGS = {"recorder off": "0", "ddplab's buffer": "2000"}


def one_rank(calls: int) -> float:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    tensor = torch.ones(1)
    for _ in range(500):
        dist.all_reduce(tensor)
    passes = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            dist.all_reduce(tensor)
        passes.append((time.perf_counter() - start) / calls * 1e6)
    dist.destroy_process_group()
    return min(passes)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(buffer: str, calls: int) -> float:
    env = dict(os.environ, TORCH_FR_BUFFER_SIZE=buffer, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               RANK="0", WORLD_SIZE="1")
    out = subprocess.run([sys.executable, __file__, "--one-rank", "--calls", str(calls)], env=env,
                         capture_output=True, text=True, check=True).stdout
    return float(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--json")
    parser.add_argument("--one-rank", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_rank:
        print(one_rank(args.calls))
        return
    rounds = {name: [] for name in SETTINGS}
    for _ in range(args.rounds):
        for name, buffer in SETTINGS.items():
            rounds[name].append(measure(buffer, args.calls))
    medians = {name: statistics.median(values) for name, values in rounds.items()}
    import torch

    result = {
        "method": "one gloo rank, 4-byte all_reduce, fastest of 5 passes of --calls back-to-back calls per process, "
                  "settings alternating in fresh processes; median over rounds",
        "torch": torch.__version__, "calls": args.calls, "rounds_us": rounds, "median_us": medians,
        "recorder_adds_us_per_call": medians["ddplab's buffer"] - medians["recorder off"],
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
