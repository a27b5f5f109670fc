"""Rows of the fault table (src/ddplab/drills/fault_table.py), once each, for real: `ddplab launch` of a training
code on CPU with gloo, 2 ranks (the victim rank 1). Each must be detected within the hang timeout + 5 s, the
culprit rank and kind right (or no culprit where none is right), nothing left running (the ranks' own children
included), the exit code as documented. scripts/fault_table.py runs the whole table (every code, 2, 3 and 4 ranks,
three times each) for docs/fault-table.md.

The subset: every fault once in the seed's DDP training, where every rule of the judge is reached, and a stall in
each other training code, whose gradients are reduced from C++ by another path (FSDP2's hooks, Lightning's and
Accelerate's DDP, no_sync accumulation). Each run costs the 2-core suite about 6 s of CPU (a launcher and 2 ranks
importing torch; Lightning and Accelerate more)."""

import pytest

from ddplab.drills import fault_table

pytestmark = pytest.mark.slow

# Rows another test drives through the same launcher with more asserted: a rank that raises (test_launch_cpu.py's
# examples, with the error's text and frame); SIGHUP (test_signals.py); and the healthy run whose ranks hold the GIL
# 4-8 s per step (about 30 s: its rule is tests/unit/test_watch_rules.py's, the whole table runs it).
ELSEWHERE = {"raise", "sighup", "gil_everywhere"}
ROWS = [(c.name, "ddp") for c in fault_table.CASES if c.name not in ELSEWHERE and "ddp" in c.codes]
ROWS += [("stall", code) for code in fault_table.CODES if code != "ddp"]


@pytest.mark.parametrize("name,code", ROWS, ids=[f"{code}-{name}" for name, code in ROWS])
def test_the_row_is_right(tmp_path, name, code):
    if code in ("lightning", "accelerate"):
        pytest.importorskip(code, reason="the test extras install it (pyproject.toml)")
    run = fault_table.run_case(fault_table.BY_NAME[name], 2, tmp_path, hang_timeout_s=5.0, code=code)
    assert run.right, f"{name}: {run.failures}; culprit {run.culprit_ranks} ({run.culprit_kind}): {run.culprit_reason}"
