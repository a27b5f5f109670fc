"""No false PASS: a drill whose ranks die before its fault goes in fails, for real on CPU.

Issue 10 got PASS from `drill kill_rank --timeout inf`: every rank crashed at init, nothing
was injected, ddplab blamed ranks [0, 1] and timed the "detection" from the start. That
option is refused now; here the ranks crash before the fault another way (a buffer of -1
elements), which the drill must not mistake for catching its fault.
"""

import signal

import pytest

from ddplab.records.config import LaunchOptions
from ddplab.drills import runner
from ddplab.measurements.drill import DrillConfig
from ddplab.drills.kill_rank import kill_when_running
from ddplab.records.core import Verdict
from ddplab.job.session import QUIET, prepare

pytestmark = pytest.mark.slow


def test_kill_rank_fails_when_the_ranks_die_before_the_kill(tmp_path):
    config = DrillConfig(launch=LaunchOptions(nproc=2, device="cpu", timeout_s=6.0, run_dir=str(tmp_path / "run")),
                         drills=("kill_rank",), victim=1)
    ctx = runner.DrillContext(config, "kill_rank", *prepare(config.launch), QUIET)
    seen = runner.observe(ctx, "kill_rank", "none", settings={"numel": -1},
                          controller=kill_when_running(1, 2, signal.SIGKILL, "SIGKILL to the rank"))
    out = seen.outcome
    assert out.session.completed is False  # the ranks did fail ...
    assert out.detected_by is not None  # ... and a failure was seen
    assert out.injected.at is None and out.injected.what is None  # but no kill went in
    assert out.detect_s is None
    assert out.verdict is Verdict.FAIL
    assert out.leaked_pids == []
