"""Process helpers the launcher, the supervisor and the drills share (one copy of each): is a pid alive, signal
one that may be gone, wait until some are gone, and a run's processes still alive after it ended (leaked).
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Sequence

import psutil

from ..basics.proc_stat import alive
from ..basics.rundir import RUN_ID_ENV

LEAK_WAIT_S = 3.0


def signal_quietly(pid: int, sig: int) -> None:
    """Send ``sig`` to a process that may already be gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def run_processes(run_id: str) -> list[int]:
    """Live processes carrying ddplab's marker of run ``run_id`` (not this process, not its own helpers)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid == os.getpid() or proc.environ().get(RUN_ID_ENV) != run_id or \
                    proc.status() == psutil.STATUS_ZOMBIE:
                continue
            # multiprocessing's resource tracker is the launcher's own helper; it exits with the launcher.
            if proc.ppid() == os.getpid() and "multiprocessing.resource_tracker" in " ".join(proc.cmdline()):
                continue
            found.append(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return found


def leaked(run_id: str | None, pids: Sequence[int], wait_s: float = LEAK_WAIT_S) -> list[int]:
    """Processes of this run (its pids, or anything carrying its run id) still alive ``wait_s`` after it ended."""
    deadline = time.monotonic() + wait_s
    while True:
        left = sorted({p for p in pids if alive(p)} | set(run_processes(run_id) if run_id else ()))
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.2)


def end_processes(pids: Sequence[int], wait_s: float = 5.0) -> None:
    """SIGKILL processes found to belong to a run (leaked ranks) and wait for them: reported, not left."""
    procs = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            proc.kill()  # psutil checks it is still the process it found (pid reuse)
            procs.append(proc)
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(procs, timeout=wait_s)


def terminate_then_kill(procs: list[psutil.Process], grace_s: float) -> tuple[list, list, list]:
    """SIGTERM, then SIGKILL what is left after ``grace_s``: (ended by SIGTERM, by SIGKILL, survived)."""
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.terminate()
    terminated, alive = psutil.wait_procs(procs, timeout=grace_s)
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    killed, survived = psutil.wait_procs(alive, timeout=grace_s)
    return terminated, killed, survived


def wait_gone(pids: Sequence[int], timeout_s: float, stop=lambda: False) -> float | None:
    """Wall time when every one of ``pids`` is gone; None after ``timeout_s`` or when ``stop()`` says so."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not stop():
        if pids and not any(alive(p) for p in pids):
            return time.time()
        time.sleep(0.05)
    return None
