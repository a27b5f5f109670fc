"""Rows of the fault table (src/ddplab/drills/fault_table.py), once each, for real: `ddplab launch` of a training
code on CPU with gloo, 2 ranks (the victim rank 1; 3 for the stall in FSDP2). Each must be detected within the hang timeout + 5 s, the
culprit rank and kind right (or no culprit where none is right), nothing left running (the ranks' own children
included), the exit code as documented. scripts/fault_table.py runs the whole table (every fault in every code,
2, 3 and 4 ranks) for docs/fault-table.md.

The subset (each run costs the 2-core suite 6-16 s: a launcher and 2 ranks importing torch, Lightning and
Accelerate more; the suite must stay under 8 minutes): the seed's stall in FSDP2, whose gradients are reduced by
hooks of its own, and in Accelerate (DDP's own reducer is the stall drill's, tests/integration/test_drills_cpu.py;
Lightning's, 16 s a run, is the full table's); and on DDP the rows whose rule only a real job reaches: a death
before a call the others never issued, a hang at exit holding the GIL, an exec. An import that stopped moving is
test_watch_rules.py's and the full table's; the other rows' rules are unit tests (test_watch_rules.py,
test_judge*.py), and the faults that end a rank (raise, SIGKILL, Ctrl+C, SIGHUP, the launcher's SIGKILL) are run
by test_launch_cpu.py, test_signals.py and the drills' tests. scripts/fault_table.py runs every row."""

import pytest

from ddplab.drills import fault_table

pytestmark = pytest.mark.slow

OTHER_CODES = ["fsdp2", "accelerate"]
ON_DDP = ["kill_before_broadcast", "exit_gil_hang", "exec"]
ROWS = [("stall", code) for code in OTHER_CODES] + [(name, "ddp") for name in ON_DDP]
# The stall in FSDP2 among 3 ranks: the victim (rank 1) has a waiter on each side, and the culprit is the rank
# behind, not the first waiter to give up (what torchrun blames).
RANKS = {("stall", "fsdp2"): 3}


@pytest.mark.parametrize("name,code", ROWS, ids=[f"{code}-{name}" for name, code in ROWS])
def test_the_row_is_right(tmp_path, name, code):
    if code in ("lightning", "accelerate"):
        pytest.importorskip(code, reason="the test extras install it (pyproject.toml)")
    run = fault_table.run_case(fault_table.BY_NAME[name], RANKS.get((name, code), 2), tmp_path, hang_timeout_s=5.0,
                               code=code)
    assert run.right, f"{name}: {run.failures}; culprit {run.culprit_ranks} ({run.culprit_kind}): {run.culprit_reason}"
