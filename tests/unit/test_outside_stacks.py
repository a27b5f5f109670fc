"""Stacks of a rank that did not answer a hang's dump request (supervision/outside_stacks.py, and the watcher's use
of it): py-spy reads them from outside, a stopped rank stays stopped, a missing py-spy is said in one line, and
faulthandler's signal goes only to a process that catches it, never to one that exec'd another program (the
signal's default action would end it, and the report would blame "signal 38")."""

import os
import signal
import subprocess
import sys
import time

import pytest

from ddplab.basics import proc_stat
from ddplab.records.supervision import RankState
from ddplab.basics.rundir import RunDir
from ddplab.supervision import outside_stacks
from ddplab.supervision.outside_stacks import SilentRank
from ddplab.supervision.rank import STACK_SIGNAL
from ddplab.supervision.watcher import Watcher

HOLDS_THE_GIL = """
import ctypes, faulthandler, signal, sys
faulthandler.register(signal.SIGRTMIN + 4, file=sys.stderr)
def hold_the_gil():
    print("holding", flush=True)
    ctypes.PyDLL(None).sleep(60)
hold_the_gil()
"""
# a rank that exec'd another program: the same pid and start time, and no handler for the stack signal any more
EXECS_AWAY = """
import faulthandler, os, signal, sys
faulthandler.register(signal.SIGRTMIN + 4, file=sys.stderr)
print("holding", flush=True)
os.execv("/bin/sleep", ["sleep", "60"])
"""

needs_py_spy = pytest.mark.skipif(outside_stacks.find() is None, reason="py-spy is in the test extras")


@pytest.fixture
def started():
    procs = []

    def start(code: str) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        procs.append(proc)
        assert proc.stdout.readline().strip() == "holding"
        time.sleep(0.2)  # into the C call (or the exec) the line announced
        return proc

    yield start
    for proc in procs:  # this test's own processes, by pid
        proc.kill()
        proc.wait(10)


@needs_py_spy
def test_a_process_holding_the_gil_is_read_from_outside_at_its_line(tmp_path, started):
    proc = started(HOLDS_THE_GIL)
    dumps, missing = outside_stacks.take([SilentRank(1, proc.pid, stopped=False)], lambda r: tmp_path / f"{r}.txt")
    assert missing is None and dumps[1].taken and dumps[1].words.startswith("py-spy --native, ")
    text = (tmp_path / "1.txt").read_text()
    assert text.startswith(f"# rank 1, pid {proc.pid}, at ") and "hold_the_gil (<string>:" in text
    assert proc.poll() is None  # still in its C call: nothing was asked of it


@needs_py_spy
def test_a_stopped_process_is_read_without_attaching_and_stays_stopped(tmp_path, started):
    proc = started(HOLDS_THE_GIL)
    os.kill(proc.pid, signal.SIGSTOP)
    assert _wait_for_state(proc.pid, "T")
    dumps, _ = outside_stacks.take([SilentRank(1, proc.pid, stopped=True)], lambda r: tmp_path / f"{r}.txt")
    assert dumps[1].taken and "stopped: read without attaching" in dumps[1].words
    assert "hold_the_gil (<string>:" in (tmp_path / "1.txt").read_text()
    assert proc_stat.state(proc.pid) == "T"


def test_without_py_spy_one_line_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setattr(outside_stacks, "find", lambda: None)
    dumps, missing = outside_stacks.take([SilentRank(1, os.getpid(), stopped=False)], lambda r: tmp_path / f"{r}.txt")
    assert (dumps, missing) == ({}, "py-spy not installed: pip install 'ddplab[stacks]' for stacks of ranks that "
                                    "hold the GIL")
    assert list(tmp_path.iterdir()) == []


def test_the_stack_signal_goes_only_to_a_process_that_catches_it(tmp_path, monkeypatch, started):
    """py-spy missing, so the signal is the only way in: the rank that exec'd another program is left alone and
    lives; the one that catches it writes its stacks, and the watcher counts the signal as its own doing."""
    monkeypatch.setattr(outside_stacks, "find", lambda: None)
    exec_d, holding = started(EXECS_AWAY), started(HOLDS_THE_GIL)
    assert proc_stat.catches(exec_d.pid, STACK_SIGNAL) is False and proc_stat.catches(holding.pid, STACK_SIGNAL)
    watcher = Watcher(RunDir.create(tmp_path / "run", "launch"), 2, 5.0)
    silent = {r: RankState(rank=r, pid=p.pid, phase="running", stack_signal=int(STACK_SIGNAL),
                           proc_start_ticks=proc_stat.start_ticks(p.pid)) for r, p in ((0, exec_d), (1, holding))}
    files, words, signalled = watcher._stacks_of_the_silent(silent)
    assert (files, words, signalled) == ({}, outside_stacks.MISSING, [1])
    assert watcher.signalled == {holding.pid}
    time.sleep(0.5)
    assert exec_d.poll() is None  # alive: its end, had it come, would have been ddplab's own signal
    holding.kill()
    assert "hold_the_gil" in holding.communicate(timeout=10)[1]  # faulthandler's stacks, on its stderr


@needs_py_spy
def test_a_process_py_spy_reads_gets_no_signal(tmp_path, started):
    """The signal would end a blocking call early and let the rank run on from where it was stuck."""
    holding = started(HOLDS_THE_GIL)
    watcher = Watcher(RunDir.create(tmp_path / "run", "launch"), 1, 5.0)
    silent = {1: RankState(rank=1, pid=holding.pid, phase="running", stack_signal=int(STACK_SIGNAL),
                           proc_start_ticks=proc_stat.start_ticks(holding.pid))}
    files, words, signalled = watcher._stacks_of_the_silent(silent)
    assert signalled == [] and watcher.signalled == set()
    assert files == {1: str(watcher.run.py_spy_file(1))} and words.startswith("rank 1: py-spy --native, ")
    holding.kill()
    assert "hold_the_gil" not in holding.communicate(timeout=10)[1]


def _wait_for_state(pid: int, letter: str, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc_stat.state(pid) == letter:
            return True
        time.sleep(0.02)
    return False
