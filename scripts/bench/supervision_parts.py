"""Where supervision's CPU goes: each part of it, timed alone in CPU time, then as CPU per second of a job at the
cadence it runs at. A benchmark, not a test: the numbers go to docs/RESULTS.md with the machine.

    python scripts/bench/supervision_parts.py [--ranks 2] [--busy] [--calls 400] [--json out.json]

In a rank (each of these runs in the beacon's thread, taking the GIL from the training loop):
  - the dump-request check, every beacon tick;
  - the heartbeat: where the main thread is, the flight recorder's status (gloo here: torch's generic recorder,
    after 2,000 all_reduces, so its buffer is full), the status write;
In the launcher (threads of its own process, on a core the ranks would otherwise have):
  - the watcher's poll: every rank's pid file and status, its CPU share, and the family walk (every descendant of
    every rank: 2 data-loader workers each here);
  - the sampler's sample (psutil per rank);
  - the straggler watch's read of every rank's published arrivals.
`--busy` keeps every core busy with spinning processes while it measures (CPU time is what is counted, so the
load changes the cost only through caches and the scheduler). The cadences are the code's own constants.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")


def _spin(stop) -> None:
    while not stop.is_set():
        pass


def cpu_us(fn, calls: int) -> float:
    """CPU time of one call, in microseconds (this thread's CPU, median of 5 batches)."""
    batches = []
    for _ in range(5):
        start = time.thread_time()
        for _ in range(max(1, calls // 5)):
            fn()
        batches.append((time.thread_time() - start) / max(1, calls // 5) * 1e6)
    return sorted(batches)[2]


def fake_ranks(run, n: int) -> list[subprocess.Popen]:
    """``n`` processes standing in for ranks, each with 2 children (its data-loader workers); their pid files."""
    code = ("import subprocess, sys, time; kids = [subprocess.Popen([sys.executable, '-c', 'import time; "
            "time.sleep(600)']) for _ in range(2)]; time.sleep(600)")
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]
    for rank, p in enumerate(procs):
        run.pid_file(rank).write_text(str(p.pid))
    time.sleep(1.0)  # their children started
    return procs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--busy", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    import torch
    import torch.distributed as dist

    from ddplab.platform import DeviceMonitor, flight_recorder
    from ddplab.basics.rundir import RunDir
    from ddplab.supervision.sampler import RankSampler
    from ddplab.supervision import beacon as beacon_mod
    from ddplab.supervision import states as rules
    from ddplab.job.supervise import SAMPLE_INTERVAL_S
    from ddplab.supervision import watcher
    from ddplab.supervision.family import Family

    stop = multiprocessing.Event()
    spinners = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True)
                for _ in range(os.cpu_count() or 1)] if args.busy else []
    for s in spinners:
        s.start()
    tmp = tempfile.mkdtemp(prefix="ddplab-parts-")
    run = RunDir.create(Path(tmp) / "run", "bench")
    procs = fake_ranks(run, args.ranks)
    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29500 + os.getpid() % 1000))
        dist.init_process_group("gloo", rank=0, world_size=1)
        t = torch.ones(1)
        for _ in range(2000):
            dist.all_reduce(t)
        beacons = [beacon_mod.Beacon(run, r, r, world_size=args.ranks) for r in range(args.ranks)]
        b = beacons[0]

        def beat():
            with b._lock:
                b.state = dataclasses.replace(b.state, **b._observe())
                b._write()

        for other in beacons[1:]:
            with other._lock:
                other._write()
        parts = {}
        parts["rank: dump-request check"] = (cpu_us(b._pending_request, args.calls), 1 / beacon_mod.TICK_S)
        parts["rank: recorder status read"] = (cpu_us(flight_recorder.StatusReader().read, args.calls // 4),
                                               1 / beacon_mod.HEARTBEAT_S)
        parts["rank: heartbeat (observe + write)"] = (cpu_us(beat, args.calls // 4), 1 / beacon_mod.HEARTBEAT_S)

        family = Family(run)

        def poll():
            pids = run.rank_pids()
            family.refresh(pids)
            rules.read_states(run)

        parts["launcher: watcher poll (pids, family, statuses)"] = (cpu_us(poll, args.calls // 4), 1 / watcher.POLL_S)
        parts["launcher: family walk alone"] = (cpu_us(lambda: family.refresh(run.rank_pids()), args.calls // 4),
                                                1 / watcher.POLL_S)
        parts["launcher: status reads alone"] = (cpu_us(lambda: rules.read_states(run), args.calls // 4),
                                                 1 / watcher.POLL_S)
        sampler = RankSampler(run, DeviceMonitor(), interval_s=SAMPLE_INTERVAL_S)  # CPU: no device to query
        parts["launcher: sampler sample"] = (cpu_us(sampler.sample_once, args.calls // 4), 1 / sampler.interval_s)
        # the straggler watch's reads: its own report (stragglers.launcher_cpu_s), scripts/bench/straggler_cost.py
    finally:
        for p in procs:
            for child in __import__("psutil").Process(p.pid).children(recursive=True):
                child.kill()
            p.kill()
            p.wait()
        stop.set()
        for s in spinners:
            s.join(timeout=5)
        if dist.is_initialized():
            dist.destroy_process_group()
    rows = []
    for name, (us, per_s) in parts.items():
        rows.append({"part": name, "cpu_us_per_call": round(us, 1), "calls_per_s": round(per_s, 2),
                     "cpu_ms_per_s": round(us * per_s / 1000, 3)})
        print(f"{name:52s} {us:9.1f} us x {per_s:5.1f}/s = {us * per_s / 1000:7.3f} ms CPU per s "
              f"({us * per_s / 1e4:.3f} % of a core)")
    summary = {"ranks": args.ranks, "busy": args.busy, "cores": os.cpu_count(), "python": platform.python_version(),
               "torch": torch.__version__, "when": time.strftime("%Y-%m-%d %H:%M"), "parts": rows,
               "processes_on_machine": len(list(Path("/proc").glob("[0-9]*"))),
               "method": "time.thread_time around each part, median of 5 batches; x the code's cadence"}
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
