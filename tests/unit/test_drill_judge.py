"""A drill whose fault did not go in fails, however the rest looks."""

import os
import signal
import subprocess
import sys
from types import SimpleNamespace

from ddplab.drills import runner
from ddplab.drills.runner import Injections, injected, judge
from ddplab.drills.kill_rank import kill_when_running
from ddplab.records.core import Verdict
from ddplab.records.drill import DrillOutcome, Injection
from ddplab.records.session import RankState


def _outcome(**kw):
    base = dict(drill="kill_rank", injected=Injection("SIGKILL to the rank", 1, 1000.0),
                detected_by="launcher teardown", detect_s=0.1, culprit_ranks=[1], leaked_pids=[], memory_back_s=None)
    base.update(kw)
    return DrillOutcome(**base)


def _judged(**kw) -> tuple[Verdict, list[str] | None]:
    out = judge(_outcome(**kw), victim=1, timeout_s=10)
    return out.verdict, out.failed_because


def test_judge_passes_a_fault_that_went_in_and_was_caught():
    assert _judged() == (Verdict.PASS, None)


def test_judge_fails_a_drill_whose_fault_was_never_injected():
    # what `drill kill_rank --timeout inf` produced: ranks crashed at init, both blamed, "detected" at once
    assert _judged(injected=Injection(None, 1, None), detected_by="rank exception", culprit_ranks=[0, 1]) == \
        (Verdict.FAIL, ["the fault never went in"])
    assert _judged(injected=None) == (Verdict.FAIL, ["the fault never went in"])


def test_judge_fails_when_measured_memory_never_came_back():
    assert _judged(device_mem_before_bytes=1 << 30) == (Verdict.FAIL, ["the device memory never came back"])
    assert _judged(device_mem_before_bytes=1 << 30, memory_back_s=0.3) == (Verdict.PASS, None)


def test_a_failed_drill_says_each_condition_it_missed():
    """What the terminal's "failed because" row and the JSON's failed_because say, one reason per condition."""
    assert _judged(detected_by=None, culprit_ranks=[], leaked_pids=[4242]) == (Verdict.FAIL, [
        "nothing detected it", "the victim, rank 1, was not named (named: nobody)",
        "processes left running: [4242]"])
    assert _judged(detect_s=15.5, culprit_ranks=[0]) == (Verdict.FAIL, [
        "detected after 15.5 s, later than the timeout + 5 s", "the victim, rank 1, was not named (named: [0])"])


def _state(rank, **kw):
    return RankState(rank=rank, local_rank=rank, pid=100 + rank, phase=kw.pop("phase", "running"), **kw)


def test_injection_time_comes_only_from_the_victim():
    assert injected(Injections(), {1: _state(1, injected="stall", injected_at=5.0)}, victim=1) == ("stall", 5.0)
    assert injected(Injections(), {0: _state(0, injected_at=5.0), 1: _state(1, phase="failed")}, victim=1) == \
        (None, None)


def test_a_controllers_record_wins_and_the_first_one_counts():
    log = Injections()
    log.record("SIGSTOP", 7.0)
    log.record("SIGSTOP again", 8.0)
    assert injected(log, {1: _state(1, injected="other", injected_at=5.0)}, victim=1) == ("SIGSTOP", 7.0)


def _run(tmp_path, pid):
    return SimpleNamespace(path=tmp_path, rank_pids=lambda: {1: pid})


def test_kill_controller_records_nothing_when_the_rank_is_already_gone(monkeypatch, tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # reaped: its pid names no process now
    monkeypatch.setattr(runner, "wait_for_ranks", lambda run, count: {1: gone.pid})
    log = Injections()
    kill_when_running(1, 2, signal.SIGKILL, "SIGKILL to the rank")(_run(tmp_path, gone.pid), log)
    assert log.at is None and log.what is None


def test_kill_controller_records_nothing_when_the_victim_runs_on_another_machine(monkeypatch, tmp_path):
    monkeypatch.setattr(runner, "wait_for_ranks", lambda run, count: {0: os.getpid()})  # this machine: rank 0
    log = Injections()
    kill_when_running(1, 1, signal.SIGKILL, "SIGKILL to the rank")(_run(tmp_path, os.getpid()), log)
    assert log.at is None


def test_kill_controller_records_the_kill_it_delivered(monkeypatch, tmp_path):
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        monkeypatch.setattr(runner, "wait_for_ranks", lambda run, count: {1: victim.pid})
        log = Injections()
        kill_when_running(1, 2, signal.SIGKILL, "SIGKILL to the rank")(_run(tmp_path, victim.pid), log)
        assert victim.wait(timeout=10) == -signal.SIGKILL
        assert log.what == "SIGKILL to the rank" and log.at > 0
    finally:
        if victim.poll() is None:
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait()


def test_drills_between_machines_skip_on_one_machine_without_starting_anything(tmp_path):
    from ddplab.records.config import LaunchOptions
    from ddplab.measurements.drill import DrillConfig
    from ddplab.drills import get
    from ddplab.drills.runner import DrillContext

    config = DrillConfig(launch=LaunchOptions(nproc=2, run_dir=str(tmp_path / "runs")), drills=("kill_node",))
    for name in ("kill_node", "partition"):
        outcome = get(name).run(DrillContext(config, name, platform=None, placement=None, observer=None))
        assert outcome.verdict is Verdict.SKIP and "--nnodes 2 or more" in outcome.culprit_reason
    assert not (tmp_path / "runs").exists()


def test_the_terminal_says_why_a_drill_failed():
    import re

    from rich.console import Console

    from ddplab.commands.drill import render_one

    console = Console(record=True, width=200, highlight=False)
    render_one(judge(_outcome(detected_by=None), victim=1, timeout_s=10), console)
    assert re.search(r"failed because +│ nothing detected it", console.export_text())
    console = Console(record=True, width=200, highlight=False)
    render_one(judge(_outcome(), victim=1, timeout_s=10), console)
    assert "failed because" not in console.export_text()


def test_a_failed_drills_check_row_says_what_it_missed():
    """The row the lab's verdict table, its page and `ddplab check` show for each drill."""
    from ddplab.measurements.drill import checks
    from ddplab.records.drill import DrillRecord

    failed, passed = (judge(_outcome(**kw), victim=1, timeout_s=10) for kw in ({"leaked_pids": [7]}, {}))
    rows = checks(DrillRecord("gloo", "host", True, [failed, passed]))
    assert [(r.verdict, r.meaning) for r in rows] == [
        (Verdict.FAIL, "it missed: processes left running: [7]"),
        (Verdict.PASS, "the stack reacted to the fault as it must")]
