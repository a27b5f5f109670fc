"""A declared hang is judged as the job stood before its teardown (supervision/job.py, evidence.py): what a rank
said, raised or dumped after the watcher began ending the job is the teardown's doing. Lightning's SIGTERM handler
calls a broadcast: the rank stuck in its own code then looked as if it had arrived where the others waited, and the
culprit's kind came out "not-in-collective" instead of "behind" (the fault table's Lightning stall rows)."""

import json
from types import SimpleNamespace

from ddplab.basics.files import write_text_atomic
from ddplab.records.codec import to_json
from ddplab.records.supervision import GroupProgress, Hang, RankError, RankState, Where
from ddplab.basics.rundir import RunDir
from ddplab.supervision.evidence import gather
from ddplab.supervision.job import _said_before_teardown

ENDED_AT = 1000.0


def _state(rank: int, heartbeat: float, enqueued: int, call: str | None = None) -> RankState:
    return RankState(rank=rank, pid=100 + rank, phase="running", heartbeat=heartbeat, in_process_group=True,
                     where=Where(call, None, ["train.py:9 in <module>"]),
                     progress={"0": GroupProgress(enqueued, -1, enqueued)}, recorder="_dump_fr_trace_json")


def _write_status(run: RunDir, state: RankState) -> None:
    write_text_atomic(run.status_file(state.rank), json.dumps(to_json(state)), make_parents=True)


def _hang() -> Hang:
    return Hang(declared_at=ENDED_AT - 3, last_progress_at=ENDED_AT - 8, no_progress_s=5, hang_timeout_s=5,
                reason="test", waiting_ranks=[0], ended_at=ENDED_AT)


def test_a_status_written_after_the_teardown_began_gives_way_to_the_last_one_before(tmp_path):
    run = RunDir(tmp_path, "rid")
    before = {0: _state(0, ENDED_AT - 0.2, 28), 1: _state(1, ENDED_AT - 0.3, 27)}
    _write_status(run, before[0])  # rank 0 wrote nothing since
    _write_status(run, _state(1, ENDED_AT + 0.4, 28, call="broadcast"))  # its SIGTERM handler's broadcast
    watcher = SimpleNamespace(run=run, hang=_hang(), before_teardown=before)
    assert _said_before_teardown(watcher) == {1: before[1]}
    assert _said_before_teardown(SimpleNamespace(run=run, hang=None, before_teardown=before)) == {}


def test_an_error_raised_or_a_record_dumped_after_the_teardown_began_is_no_evidence(tmp_path):
    run = RunDir(tmp_path, "rid")
    for rank, at in ((0, ENDED_AT - 1), (1, ENDED_AT + 1)):
        error = RankError(rank=rank, type="KeyboardInterrupt", message="", traceback="", at=at)
        write_text_atomic(run.error_file(rank), json.dumps(to_json(error)), make_parents=True)
        write_text_atomic(run.flight_file(rank), json.dumps({"pg_status": {}, "entries": [], "dumped_at": at}))
    states = {r: _state(r, ENDED_AT - 1, 3) for r in (0, 1)}
    evidence = gather(run, [0, 1], states, {}, None, until=ENDED_AT)
    assert evidence[0].error is not None and evidence[0].record is not None
    assert evidence[1].error is None and evidence[1].record is None
    everything = gather(run, [0, 1], states, {}, None)
    assert everything[1].error is not None and everything[1].record is not None
