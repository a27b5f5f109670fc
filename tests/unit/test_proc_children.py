"""A rank's descendants, read from its threads' /proc children files (proc_stat.descendants), are the processes
psutil's full scan finds: the family walk (supervision/family.py) takes the cheap read where the kernel has it."""

import subprocess
import sys
import time

import psutil
import pytest

from ddplab.basics import proc_stat

GRANDCHILD = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); " \
             "time.sleep(60)"


@pytest.mark.skipif(not proc_stat.HAS_CHILDREN_FILES, reason="the kernel has no /proc/PID/task/TID/children")
def test_descendants_are_what_psutil_finds_by_scanning_every_process():
    child = subprocess.Popen([sys.executable, "-c", GRANDCHILD])
    try:
        deadline = time.monotonic() + 20
        while len(psutil.Process(child.pid).children(recursive=True)) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        scanned = sorted(p.pid for p in psutil.Process(child.pid).children(recursive=True))
        assert len(scanned) == 1
        assert sorted(proc_stat.descendants(child.pid)) == scanned
        assert child.pid in proc_stat.children(psutil.Process().pid)
    finally:
        for p in psutil.Process(child.pid).children(recursive=True):
            p.kill()
        child.kill()
        child.wait()


def test_a_process_gone_has_no_children():
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert proc_stat.children(int(done.stdout)) in ([], None)
