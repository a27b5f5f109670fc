"""Rows of the fault table (src/ddplab/drills/fault_table.py), once each, for real: `ddplab launch` of a training
code on CPU with gloo, 2 ranks (the victim rank 1). Each must be detected within the hang timeout + 5 s, the
culprit rank and kind right (or no culprit where none is right), nothing left running (the ranks' own children
included), the exit code as documented. scripts/fault_table.py runs the whole table (every fault in every code,
2, 3 and 4 ranks) for docs/fault-table.md.

The subset (each run costs the 2-core suite 6-10 s of CPU: a launcher and 2 ranks importing torch, Lightning and
Accelerate more): the seed's stall in every training code, whose gradients are reduced from C++ by another path
(DDP's reducer, no_sync accumulation, FSDP2's hooks, Lightning's and Accelerate's DDP), and on DDP the rows whose
rule the unit tests (tests/unit/test_watch_rules.py, test_judge*.py) cannot reach alone: a death before a call
the others never issued, deaths 50 ms apart, an abort in the rank's own code, a hang at exit holding the GIL, a
stop inside an import, an exec, an early exit 0, DDP's construction check naming rank 0. The other rows' rules
are single-process unit tests, and the faults that end a rank (raise, SIGKILL, Ctrl+C, SIGHUP, the launcher's
SIGKILL) are run by test_launch_cpu.py, test_signals.py and the drills' tests."""

import pytest

from ddplab.drills import fault_table

pytestmark = pytest.mark.slow

ON_DDP = ["exit0", "kill_before_broadcast", "exit_then_raise", "abort", "exit_gil_hang", "stop_in_import", "exec",
          "param_mismatch_rank0"]
ROWS = [("stall", code) for code in fault_table.CODES] + [(name, "ddp") for name in ON_DDP]


@pytest.mark.parametrize("name,code", ROWS, ids=[f"{code}-{name}" for name, code in ROWS])
def test_the_row_is_right(tmp_path, name, code):
    if code in ("lightning", "accelerate"):
        pytest.importorskip(code, reason="the test extras install it (pyproject.toml)")
    run = fault_table.run_case(fault_table.BY_NAME[name], 2, tmp_path, hang_timeout_s=5.0, code=code)
    assert run.right, f"{name}: {run.failures}; culprit {run.culprit_ranks} ({run.culprit_kind}): {run.culprit_reason}"
