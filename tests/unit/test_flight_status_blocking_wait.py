"""The flight recorder's per-group status where torch keeps none (platform/flight_recorder.py ``StatusReader``).

Under NCCL's blocking wait torch updates no per-group status: every count stays -1. On one H200 (torch 2.11,
NCCL 2.30.7, docs/RESULTS.md) the stall drill's blocking-wait run was never ended: rank 0 sat in a device
synchronize behind the stalled rank 1, its status showed nothing pending, so no rank looked as if it waited. These
tests feed the beacon and the judge what that run's recorder gave (a -1 status, entries still recorded) through a
stand-in for torch's dump function."""

import json
import sys
import types

import pytest

from ddplab.records.supervision import RankState
from ddplab.basics.rundir import RunDir
from ddplab.supervision import states
from ddplab.supervision.beacon import Beacon
from ddplab.supervision.evidence import RankEvidence

BLIND = {"0": {"last_enqueued_collective": "-1", "last_started_collective": "-1", "last_completed_collective": "-1"}}


def nccl_entry(seq: int, state: str = "scheduled") -> dict:
    return {"collective_seq_id": seq, "p2p_seq_id": 0, "pg_id": 0, "process_group": ["0", "default_pg"],
            "profiling_name": "nccl:all_reduce", "is_p2p": False, "state": state}


class Recorder:
    """torch._C._distributed_c10d as the beacon sees it: a status without counts and the entries recorded."""

    def __init__(self, status: dict):
        self.status, self.entries, self.calls = status, [], []

    def dump(self, include_collectives: bool, only_active: bool) -> bytes:
        self.calls.append((include_collectives, only_active))
        record = {"version": "2.10", "pg_status": self.status}
        if include_collectives:
            record["entries"] = [e for e in self.entries if not (only_active and e["state"] == "completed")]
        return json.dumps(record).encode()


@pytest.fixture
def recorder(monkeypatch):
    def install(status: dict, dumper: str = "_dump_nccl_trace_json") -> Recorder:
        fake = Recorder(status)
        module = types.ModuleType("torch._C._distributed_c10d")
        setattr(module, dumper, fake.dump)
        monkeypatch.setitem(sys.modules, "torch._C._distributed_c10d", module)
        return fake
    return install


def observed(beacon: Beacon) -> RankState:
    return RankState(rank=0, pid=1, phase="running", **beacon._observe())


def test_a_collective_stuck_under_blocking_wait_shows_pending_and_the_rank_waiting(tmp_path, recorder):
    fake = recorder(BLIND)
    beacon = Beacon(RunDir.create(tmp_path / "job", "launch"), 0, 0, phase="running")
    fake.entries = [nccl_entry(seq, "completed") for seq in range(1, 6)] + [nccl_entry(6)]
    state = observed(beacon)
    assert (state.progress["0"].enqueued, state.progress["0"].completed) == (6, 5)
    assert states.pending(state) and states.is_waiting(state)
    fake.entries[-1]["state"] = "completed"  # the peer came: nothing is going, the count stays
    state = observed(beacon)
    assert (state.progress["0"].enqueued, state.progress["0"].completed) == (6, 6)
    assert not states.is_waiting(state)
    assert fake.calls[-1] == (True, True)  # only the active entries were asked for


def test_a_group_torch_counts_itself_costs_no_second_dump(tmp_path, recorder):
    fake = recorder({"0": {"last_enqueued_collective": "4", "last_started_collective": "-1",
                           "last_completed_collective": "3"}})
    state = observed(Beacon(RunDir.create(tmp_path / "job", "launch"), 0, 0, phase="running"))
    assert (state.progress["0"].enqueued, state.progress["0"].completed) == (4, 3)
    assert fake.calls == [(False, False)]


def test_the_generic_recorder_is_never_asked_for_its_entries_at_a_heartbeat(tmp_path, recorder):
    """gloo's entries never leave "scheduled": an active dump would be its whole buffer at every beat."""
    fake = recorder(BLIND, dumper="_dump_fr_trace_json")
    fake.entries = [nccl_entry(1)]
    state = observed(Beacon(RunDir.create(tmp_path / "job", "launch"), 0, 0, phase="running"))
    assert state.progress["0"].enqueued == -1 and fake.calls == [(False, False)]


def test_the_judge_counts_a_dump_by_its_entries_where_its_status_says_nothing():
    record = {"pg_status": BLIND, "entries": [nccl_entry(seq, "completed") for seq in range(1, 6)] + [nccl_entry(6)]}
    assert RankEvidence(0, status=None, record=record).progress == {"0": 6}
    assert RankEvidence(1, status=None, record={"pg_status": BLIND, "entries": []}).progress == {"0": -1}
