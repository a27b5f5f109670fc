"""Workers must not outlive their launcher, even when it is SIGKILLed (plain torchrun's do)."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import processes_with_env, survivors

pytestmark = pytest.mark.slow


def _wait_for(predicate, timeout: float, step: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


def test_sigkill_of_ddplab_leaves_no_rank_alive(tmp_path):
    run_dir = tmp_path / "run"
    launcher = subprocess.Popen(
        [sys.executable, "-m", "ddplab", "train", "--nproc", "2", "--steps", "1000000", "--run-dir", str(run_dir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
    try:
        pid_files = _wait_for(lambda: len(list((run_dir / "pids").glob("[0-9]*"))) == 2 and
                              list((run_dir / "pids").glob("[0-9]*")), timeout=60)
        assert pid_files, "ranks never started"
        rank_pids = [int(p.read_text()) for p in pid_files]
        run_id = (run_dir / "job.json").exists() and _run_id_of(rank_pids[0])
        assert all(_alive(p) for p in rank_pids), "ranks should be training"

        os.kill(launcher.pid, signal.SIGKILL)
        launcher.wait(timeout=10)

        left = survivors(rank_pids, _alive, within_s=3)
        assert left == [], f"ranks {left} outlived their SIGKILLed launcher"
        assert survivors([run_id], lambda rid: processes_with_env("DDPLAB_RUN_ID", rid), within_s=3) == []
    finally:
        if launcher.poll() is None:
            launcher.kill()


def _run_id_of(pid: int) -> str:
    import psutil

    return psutil.Process(pid).environ()["DDPLAB_RUN_ID"]


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
