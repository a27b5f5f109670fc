#!/usr/bin/env python3
"""What reading a silent rank's stacks with py-spy costs a hang declaration (supervision/outside_stacks.py): N
processes that imported torch and joined one gloo group, each then stuck in C while holding the GIL (a sleep through
ctypes.PyDLL, or sum(range(...)) computing), read with py-spy at once, as the watcher reads the ranks that did not
answer; and one of them SIGSTOPped, read without attaching.

    .venv/bin/python scripts/py_spy_cost.py --ranks 1,2,4 --repeat 5

Prints JSON: for each rank count and way of holding the GIL, the seconds of every py-spy dump and of the whole take
(every rank at once), with --native and without; whether every dump showed the rank's own line; and whether a rank
holding the GIL in a C sleep was still in it afterwards (py-spy asks nothing of the process).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ddplab.basics import proc_stat
from ddplab.supervision import outside_stacks
from ddplab.supervision.outside_stacks import SilentRank

RANK = """
import ctypes, os, sys, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=int(sys.argv[2]), world_size=int(sys.argv[3]))
dist.all_reduce(torch.ones(4))
def user_line():
    print("holding", flush=True)
    if sys.argv[4] == "sleep":
        ctypes.PyDLL(None).sleep(600)
    else:
        sum(range(10 ** 12))
user_line()
"""


def start(n: int, how: str, workdir: Path) -> list[subprocess.Popen]:
    store = workdir / f"store-{time.monotonic_ns()}"
    procs = [subprocess.Popen([sys.executable, "-c", RANK, str(store), str(r), str(n), how], stdout=subprocess.PIPE,
                              text=True) for r in range(n)]
    for proc in procs:
        assert proc.stdout.readline().strip() == "holding"
    time.sleep(0.3)
    return procs


def timed_take(targets: list[SilentRank], workdir: Path, native: bool) -> dict:
    started = time.monotonic()
    dumps, missing = outside_stacks.take(targets, lambda r: workdir / f"py-spy-{r}.txt", native=native)
    took = time.monotonic() - started
    shown = all("user_line (<string>:" in Path(d.file).read_text() for d in dumps.values() if d.file)
    return {"take_s": round(took, 3), "dumps": [dumps[r].words for r in sorted(dumps)], "missing": missing,
            "all_taken": all(d.taken for d in dumps.values()), "user_line_shown": shown}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="1,2,4")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    assert outside_stacks.find(), "py-spy not installed: pip install 'ddplab[stacks]'"
    py_spy_version = subprocess.run([outside_stacks.find(), "--version"], capture_output=True, text=True).stdout
    out = {"machine": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
           "py_spy": py_spy_version.strip(), "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for n in (int(x) for x in args.ranks.split(",")):
            for how in ("sleep", "compute"):
                procs = start(n, how, workdir)
                try:
                    targets = [SilentRank(r, p.pid, stopped=False) for r, p in enumerate(procs)]
                    for native in (True, False):
                        for _ in range(args.repeat):
                            out["runs"].append({"ranks": n, "holding": how, "native": native,
                                                **timed_take(targets, workdir, native)})
                    if how == "sleep":
                        os.kill(procs[0].pid, signal.SIGSTOP)
                        time.sleep(0.2)
                        stopped = timed_take([SilentRank(0, procs[0].pid, stopped=True)], workdir, False)
                        out["runs"].append({"ranks": 1, "holding": "sleep, then SIGSTOP", "native": False,
                                            **stopped, "state_after": proc_stat.state(procs[0].pid)})
                        os.kill(procs[0].pid, signal.SIGCONT)
                        time.sleep(0.2)
                        # a C sleep that returned would have ended the script: every rank is still in it
                        out["runs"][-1]["every_rank_still_in_its_sleep"] = all(p.poll() is None for p in procs)
                finally:
                    for proc in procs:  # this script's own processes, by pid
                        proc.kill()
                        proc.wait()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
