"""Every row of the fault table (src/ddplab/drills/fault_table.py), once, for real: `ddplab launch` of the drill
script on CPU with gloo, 3 ranks, the victim in the middle (rank 1). Each must be detected within the hang
timeout + 5 s, the culprit rank and kind right (or no culprit where none is right), nothing left running (the
ranks' own children included), the exit code as documented. scripts/fault_table.py runs the full table (2, 3 and
4 ranks, three times each) for docs/fault-table.md."""

import pytest

from ddplab.drills import fault_table

pytestmark = pytest.mark.slow


# A row whose fault another test drives through the same launcher with more asserted: a rank that raises
# (test_launch_cpu.py's examples, with the error's text and frame). Each row costs the 2-core suite about 8 s of
# CPU (a launcher and 3 ranks importing torch); scripts/fault_table.py still runs every row.
ELSEWHERE = {"raise"}


@pytest.mark.parametrize("name", [c.name for c in fault_table.CASES if c.name not in ELSEWHERE])
def test_the_row_is_right(tmp_path, name):
    run = fault_table.run_case(fault_table.BY_NAME[name], 3, tmp_path, hang_timeout_s=5.0)
    if name == "mismatch" and not run.right and _sender_record_lost(tmp_path / "mismatch-3", run.victim):
        # docs/fault-table.md, known limits: gloo's receiver aborts, the teardown ends the sender before it wrote its
        # flight record (seen once in CI, under load), and the judge falls back to the order of deaths, saying so
        assert (run.culprit_kind, run.culprit_ranks, run.exit_code) == ("died", [0], 1), run
        assert "SIGABRT, the first to fail; a SIGABRT is also how the collective library aborts" in run.culprit_reason
        assert f"rank(s) {run.victim} left no flight record to compare" in run.culprit_reason, run.culprit_reason
        return
    assert run.right, f"{name}: {run.failures}; culprit {run.culprit_ranks} ({run.culprit_kind}): {run.culprit_reason}"


def _sender_record_lost(job, victim: int) -> bool:
    return not (job / "ranks" / str(victim) / "flight.json").exists()
