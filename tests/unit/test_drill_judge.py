"""A drill whose fault did not go in fails, however the rest looks."""

import os
import signal
import subprocess
import sys
from types import SimpleNamespace

from ddplab.drills import common
from ddplab.drills.common import DrillOptions, injected_time, judge, kill_when_running


def _outcome(**kw):
    base = {"injected": {"what": "SIGKILL to the rank", "rank": 1, "at": 1000.0}, "detected_by": "launcher teardown",
            "detect_s": 0.1, "culprit_ranks": [1], "leaked_pids": [], "memory_back_s": None}
    base.update(kw)
    return base


def test_judge_passes_a_fault_that_went_in_and_was_caught():
    assert judge(_outcome(), victim=1, timeout_s=10, memory_measured=False) == "pass"


def test_judge_fails_a_drill_whose_fault_was_never_injected():
    # what `drill kill_rank --timeout inf` produced: ranks crashed at init, both blamed, "detected" at once
    not_injected = _outcome(injected={"what": None, "rank": 1, "at": None}, detected_by="rank exception",
                            culprit_ranks=[0, 1])
    assert judge(not_injected, victim=1, timeout_s=10, memory_measured=False) == "fail"
    assert judge(_outcome(injected=None), victim=1, timeout_s=10, memory_measured=False) == "fail"


def test_injection_time_comes_only_from_the_victim():
    assert injected_time({1: {"injected_at": 5.0}}, victim=1) == 5.0
    assert injected_time({0: {"injected_at": 5.0}, 1: {"phase": "failed"}}, victim=1) is None


def test_kill_controller_records_nothing_when_the_rank_is_already_gone(monkeypatch, tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # reaped: its pid names no process now
    monkeypatch.setattr(common, "wait_for_pids", lambda path, count: [gone.pid])
    run = SimpleNamespace(path=tmp_path, rank_pids=lambda: {1: gone.pid})
    injected: dict = {}
    kill_when_running(signal.SIGKILL, "SIGKILL to the rank")(injected, DrillOptions(victim=1))(run)
    assert injected == {}


def test_kill_controller_records_the_kill_it_delivered(monkeypatch, tmp_path):
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        monkeypatch.setattr(common, "wait_for_pids", lambda path, count: [victim.pid])
        run = SimpleNamespace(path=tmp_path, rank_pids=lambda: {1: victim.pid})
        injected: dict = {}
        kill_when_running(signal.SIGKILL, "SIGKILL to the rank")(injected, DrillOptions(victim=1))(run)
        assert victim.wait(timeout=10) == -signal.SIGKILL
        assert injected["what"] == "SIGKILL to the rank" and injected["at"] > 0
    finally:
        if victim.poll() is None:
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait()
