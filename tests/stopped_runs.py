"""Starting `python -m ddplab` as a terminal would, waiting for it to be ready, and finding what it left: the
helpers of the tests that stop a run (test_signals, test_machine_waits, test_check_stopped)."""

import glob
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

def start(args, tmp_path) -> subprocess.Popen:
    """`python -m ddplab ARGS` in a session of its own (a terminal's foreground group, for killpg);
    output to a file, which cannot fill up and block the process as a pipe would."""
    log = open(tmp_path / "output.txt", "w")
    env = dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="200")
    return subprocess.Popen([sys.executable, "-m", "ddplab", *args], stdout=log, stderr=subprocess.STDOUT,
                            cwd=tmp_path, env=env, start_new_session=True)


def finish(proc, tmp_path, timeout=180) -> str:
    proc.wait(timeout=timeout)
    return (tmp_path / "output.txt").read_text()


def wait_for(predicate, proc, timeout=240, step=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        assert proc.poll() is None, f"ddplab exited ({proc.returncode}) before it was ready"
        time.sleep(step)
    pytest.fail("never ready")


def spawned_ranks(proc) -> list[psutil.Process]:
    try:
        kids = psutil.Process(proc.pid).children()
    except psutil.NoSuchProcess:
        return []
    out = []
    for k in kids:
        try:
            if "spawn_main" in " ".join(k.cmdline()):
                out.append(k)
        except psutil.NoSuchProcess:
            continue
    return out


def child_launcher_pid_files(runs: Path) -> list[str]:
    """Pid files of the ranks of kill_launcher's child `ddplab train`, wherever under ``runs``."""
    return glob.glob(f"{runs}/**/launcher/pids/[0-9]*", recursive=True)


def processes_under(directory: Path) -> list[int]:
    """Live processes of any run whose directory is inside ``directory`` (DDPLAB_RUN_DIR)."""
    found = []
    for proc in psutil.process_iter():
        try:
            run_dir = proc.environ().get("DDPLAB_RUN_DIR", "")
            if run_dir.startswith(str(directory)) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def alive(procs: list[psutil.Process]) -> list[int]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except psutil.NoSuchProcess:
            continue
    return out


def settle(check, timeout=5.0):
    """``check()`` once it is empty, or its last value: a process that just got SIGKILL needs a moment."""
    deadline = time.monotonic() + timeout
    value = check()
    while value and time.monotonic() < deadline:
        time.sleep(0.1)
        value = check()
    return value


IDLE_RANKS = """\
import os, time
import torch.distributed as dist
dist.init_process_group("gloo")
open(f"ready.{os.environ['RANK']}", "w").close()
time.sleep(600)  # every rank in user code, none in a collective (a data loader that never yields)
"""
