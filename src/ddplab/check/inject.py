"""Faults put into a check on purpose, so that tests (and an operator trying a runner's setup) can see a degraded
node without one: `--inject` (hidden from --help), any number of times.

    slow:OP    the sweep's rows of OP at its largest size made 100x slower (time x100, algbw and busbw / 100)
    wrong:OP   the same rows given wrong data (#wrong = every element)
    leftover   a real orphaned rank on the machine before the environment is surveyed: a sleeping process
               marked by a "launcher" that has already exited (supervision/procs.py's rules find it), ended once the
               check has judged the node, and gone by itself within LEFTOVER_LIFE_S whatever happens

Row faults change the sweep's record after it ran (or after it was read back, with --from-report) and the
stage's verdict is judged again from it, exactly as the sweep judges itself. A check with injected faults
says so in its report (``injected``) and in its status line.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from .. import measurements
from ..basics.files import write_text_atomic
from ..basics.rundir import RUN_ID_FILE
from ..records.run import StageRecord
from .config import parse_injection
from .metrics import stage_of

SLOWDOWN = 100.0  # below every built-in floor (rules.CEILING_SHARE) on every machine measured
LEFTOVER_LIFE_S = 120
# The "launcher": starts one sleeping rank marked with its own identity (supervision/procs.py), prints its pid, exits.
_LAUNCHER = """import os, subprocess, sys
stat = open("/proc/self/stat").read()
ticks = stat[stat.rindex(")") + 2:].split()[19]
env = {k: v for k, v in os.environ.items() if not k.startswith(("DDPLAB_", "TORCHELASTIC_"))}
env.update(DDPLAB_RUN_ID=sys.argv[1], DDPLAB_RUN_DIR=sys.argv[3], DDPLAB_LAUNCHER_PID=str(os.getpid()),
           DDPLAB_LAUNCHER_START=ticks)
rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(%d)" % int(sys.argv[2])], env=env,
                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                        start_new_session=True)
print(rank.pid, flush=True)
"""


def wants_leftover(specs) -> bool:
    return any(parse_injection(s)[0] == "leftover" for s in specs)


def apply_row_faults(stages: list[StageRecord], specs) -> list[StageRecord]:
    """The stages with the sweep's rows changed as ``specs`` say, the sweep judged again."""
    faults = [(kind, op) for kind, op in map(parse_injection, specs) if kind != "leftover"]
    sweep = stage_of(stages, "sweep")
    if not faults or sweep is None:
        return stages
    measurement = measurements.get("sweep")
    record = sweep.report.results
    rows = list(record.rows)
    for kind, op in faults:
        timed = [r.size_bytes for r in rows if r.op == op and r.time_us is not None]
        if not timed:
            continue
        largest = max(timed)
        rows = [_fault(r, kind) if r.op == op and r.size_bytes == largest and r.time_us is not None else r
                for r in rows]
    busbw = [r.busbw_gbps for r in rows if r.busbw_gbps is not None]
    record = replace(record, rows=rows, num_wrong_total=sum(r.num_wrong or 0 for r in rows),
                     avg_busbw_gbps=sum(busbw) / len(busbw) if busbw else None)
    report = replace(sweep.report, results=record, verdict=measurements.verdict(measurement, record))
    changed = replace(sweep, report=report, verdict=report.verdict, summary=measurement.summary(record))
    return [changed if s is sweep else s for s in stages]


def _fault(row, kind: str):
    if kind == "wrong":
        return replace(row, num_wrong=row.count or 1)
    scale = lambda x: None if x is None else x / SLOWDOWN  # noqa: E731
    return replace(row, time_us=row.time_us * SLOWDOWN, algbw_gbps=scale(row.algbw_gbps),
                   busbw_gbps=scale(row.busbw_gbps), busbw_fraction_of_ceiling=scale(row.busbw_fraction_of_ceiling),
                   repeat_us=[t * SLOWDOWN for t in row.repeat_us] if row.repeat_us else row.repeat_us)


@contextlib.contextmanager
def leftover(run_id: str, run_dir: Path):
    """A real orphaned rank for the check's environment survey to find, ended on exit; yields the words the report
    says it in."""
    import psutil

    # its run directory holds its run id, as a real run's does (supervision/procs.py ties a marker to a run by it)
    write_text_atomic(run_dir / RUN_ID_FILE, run_id + "\n", make_parents=True)
    done = subprocess.run([sys.executable, "-c", _LAUNCHER, run_id, str(LEFTOVER_LIFE_S), str(run_dir.resolve())],
                          capture_output=True, text=True, timeout=60, check=True)
    pid = int(done.stdout.strip())
    proc = psutil.Process(pid)  # remembers its start time: never kills a reused pid
    try:
        yield f"leftover: pid {pid}, a rank of run {run_id} whose launcher exited"
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
            # Re-parented to this process (a subreaper, or the init of a PID namespace), it is ours to reap.
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                with contextlib.suppress(psutil.TimeoutExpired):
                    proc.wait(timeout=5)
