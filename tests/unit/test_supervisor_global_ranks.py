"""The second machine of a job: its supervisor expects ITS ranks (global 2 and 3) and names culprits by
global rank (issue 11: it used to take the local count for the world size and name "rank 0 never started")."""

import json
import subprocess
import time

import pytest

from ddplab.supervision import states as status
from ddplab.records.codec import to_json
from ddplab.records.supervision import RankState
from ddplab.basics.rundir import RunDir
from ddplab.supervision.watcher import Watcher
from tests.unit.judged import culprit_of


def _write(run: RunDir, state: RankState) -> None:
    run.status_file(state.rank).parent.mkdir(parents=True, exist_ok=True)
    run.status_file(state.rank).write_text(json.dumps(to_json(state)))


def _state(rank, local_rank, pid, phase, seq, done):
    now = time.time()
    return RankState(rank=rank, local_rank=local_rank, pid=pid, phase=phase, seq=seq, done=done, op="all_reduce", numel=1024, since=now,
                     heartbeat=now)


def test_culprits_are_named_by_global_rank_among_this_machines_ranks(tmp_path):
    run = RunDir.create(tmp_path / "node1", "train")
    _write(run, _state(2, 0, 1, "in-collective", 6, 5))
    assert status.name_culprits(status.read_states(run), 2, time.time(), 10) == ([3], "never started (no status "
                                                                                    "written)")
    _write(run, _state(3, 1, 1, "stalled", 5, 5))
    culprits, why = status.name_culprits(status.read_states(run), 2, time.time(), 10)
    assert culprits == [3] and "entered 5 collectives while others entered 6" in why


@pytest.mark.usefixtures("stand_ins_never_answer")  # tests/unit/conftest.py
def test_the_second_machines_supervisor_names_its_stalled_global_rank(tmp_path):
    run = RunDir.create(tmp_path / "node1", "drill")
    ranks = [subprocess.Popen(["sleep", "60"]) for _ in range(2)]  # stand-ins for the two ranks' processes
    try:
        _write(run, _state(2, 0, ranks[0].pid, "in-collective", 6, 5))
        _write(run, _state(3, 1, ranks[1].pid, "stalled", 5, 5))
        with Watcher(run, local_count=2, hang_timeout_s=0.5, grace_s=0.5) as supervisor:
            deadline = time.monotonic() + 10
            while supervisor.hang is None and time.monotonic() < deadline:
                for rank, proc in ((2, ranks[0]), (3, ranks[1])):  # heartbeats go on, nothing progresses
                    state = status.read_states(run).get(rank)
                    if state is not None:
                        _write(run, RankState(**{**state.__dict__, "heartbeat": time.time()}))
                time.sleep(0.1)
        assert supervisor.hang is not None and culprit_of(run, supervisor, 2).ranks == [3]
    finally:
        for proc in ranks:
            proc.kill()
            proc.wait()
