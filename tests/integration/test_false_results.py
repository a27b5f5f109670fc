"""No false PASS: a drill whose ranks die before its fault goes in fails, for real on CPU.

Issue 10 got PASS from `drill kill_rank --timeout inf`: every rank crashed at init, nothing
was injected, ddplab blamed ranks [0, 1] and timed the "detection" from the start. That
option is refused now; here the ranks crash before the fault another way (a buffer of -1
elements), which the drill must not mistake for catching its fault.
"""

import pytest

from ddplab.drills import common
from ddplab.drills.common import DrillOptions, judge

pytestmark = pytest.mark.slow


def test_kill_rank_fails_when_the_ranks_die_before_the_kill(tmp_path):
    opts = DrillOptions(nproc=2, device="cpu", timeout_s=6.0, victim=1, run_dir=str(tmp_path / "run"))
    out = common.run_inprocess("kill_rank", opts, "none", settings={"numel": -1},
                               controller_factory=common.kill_when_running(9, "SIGKILL to the rank"))
    assert out["session"]["completed"] is False  # the ranks did fail ...
    assert out["detected_by"] is not None  # ... and a failure was seen
    assert out["injected"]["at"] is None and out["injected"]["what"] is None  # but no kill went in
    assert out["detect_s"] is None
    assert judge(out, opts.victim, opts.timeout_s, memory_measured=False) == "fail"
    assert out["leaked_pids"] == []
