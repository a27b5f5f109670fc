"""A rank of another machine failed, and this machine's ranks keep running: elastic here does not act on it
(its agent watches only its own ranks, and the job's store still answers where this machine hosts it), so the
supervisor must. The late_rank drill across two launchers, as the victim's launcher sees it when it hosts the
store: rank 0 (other machine) gave up in init and failed there, rank 1 (here) still sleeps before init. Before
this change the supervisor stopped judging at the first failed rank, and rank 1 ran until its sleep ended."""

import json
import subprocess
import threading
import time
from dataclasses import replace

import pytest
from torch.distributed import HashStore

from ddplab.supervision import states as status
from ddplab.cluster.status_store import JobStoreReader, StatusPublisher
from ddplab.records.codec import to_json
from ddplab.records.supervision import RankState
from ddplab.basics.rundir import RunDir
from ddplab.supervision.watcher import JOB_STORE, Watcher as Supervisor
from tests.unit.judged import culprit_of

JOB = "ddplab-127.0.0.1:29400"
OTHER, HERE = "10.9.0.1", "10.9.0.2"


def _rank0_gave_up_in_init(now: float) -> RankState:
    """The other machine's rank: waited 6 s in init for rank 1, then failed there (its last words)."""
    return RankState(rank=0, local_rank=0, pid=4242, phase="failed", since=now - 1, heartbeat=now - 1, world_size=2,
                     node_rank=0, host="vm", address=OTHER, beat=20, error="DistStoreError: wait timeout",
                     failed_at=now - 1, failed_in="in-init", failed_in_since=now - 7)


def _rank1_asleep_before_init(pid: int, now: float, beat: int = 1) -> RankState:
    """This machine's rank: the late one, alive (beating) and still before init."""
    return RankState(rank=1, local_rank=0, pid=pid, phase="before-init", since=now - 10, heartbeat=now, world_size=2,
                     node_rank=1, host="vm", address=HERE, beat=beat, injected="late", injected_at=now - 10)


def test_a_failure_elsewhere_is_one_elastic_here_does_not_act_on():
    now = time.time()
    job = {0: _rank0_gave_up_in_init(now), 1: _rank1_asleep_before_init(99, now)}
    mine = {1: job[1]}
    assert status.failed_elsewhere(job, mine) == [0]
    # a rank here ended too: this machine's agent tears its group down itself
    assert status.failed_elsewhere(job, {1: replace(job[1], phase="failed")}) == []
    assert status.failed_elsewhere(job, {1: replace(job[1], phase="finished")}) == []
    # no rank here wrote a status yet: nothing of this machine's to judge
    assert status.failed_elsewhere(job, {}) == []
    # a rank elsewhere that finished is no failure: the job may be ending well
    assert status.failed_elsewhere({**job, 0: replace(job[0], phase="finished")}, mine) == []


def test_the_failed_ranks_stopped_heartbeat_does_not_make_it_the_culprit():
    now = time.time()
    job = {0: _rank0_gave_up_in_init(now - 30), 1: _rank1_asleep_before_init(99, now)}  # rank 0 silent for 30 s
    culprits, why = status.name_culprits_after_failure(job, 1, now, stale_s=2.0, expected=[0, 1])
    assert culprits == [1] and "never reached init_process_group" in why
    # the live judge holds no heartbeat against a rank that ended (it once blamed rank 0, by its stopped beat)
    assert status.name_culprits(job, 1, now, stale_s=2.0, expected=[0, 1])[0] == [1]
    # a rank here that stopped beating is named first
    frozen = {**job, 1: replace(job[1], heartbeat=now - 30)}
    assert status.name_culprits_after_failure(frozen, 1, now, stale_s=2.0, expected=[0, 1])[0] == [1]


class _Rank1Beating(threading.Thread):
    """Rank 1 as a rank writes itself: its status file and the job's store, every 0.1 s, never progressing."""

    def __init__(self, run: RunDir, store: HashStore, pid: int):
        super().__init__(daemon=True)
        self.rundir, self.pid, self.stop = run, pid, threading.Event()
        self.publisher = StatusPublisher(store, 1, job=JOB)
        self.rundir.status_file(1).parent.mkdir(parents=True, exist_ok=True)
        self._beat(1)

    def run(self):
        beat = 1
        while not self.stop.wait(0.1):
            beat += 1
            self._beat(beat)

    def _beat(self, beat: int) -> None:
        state = _rank1_asleep_before_init(self.pid, time.time(), beat)
        self.rundir.status_file(1).write_text(json.dumps(to_json(state)))
        self.publisher.publish(state)


def _victims_launcher(tmp_path) -> RunDir:
    run = RunDir.create(tmp_path / "second", "drill")
    run.listen_file.write_text(json.dumps({"address": "127.0.0.1", "port": 29400,
                                           "across_machines": {"hosts_store": True}}))
    return run


@pytest.mark.usefixtures("stand_ins_never_answer")  # tests/unit/conftest.py
def test_the_victims_launcher_ends_its_own_rank_when_the_other_machines_rank_failed(tmp_path):
    store = HashStore()
    StatusPublisher(store, 0, job=JOB).publish(_rank0_gave_up_in_init(time.time()))
    victim = subprocess.Popen(["sleep", "60"])  # stands in for rank 1, sleeping out its delay before init
    run = _victims_launcher(tmp_path)
    beating = _Rank1Beating(run, store, victim.pid)
    beating.start()
    try:
        with Supervisor(run, local_count=1, hang_timeout_s=0.5, grace_s=0.5, job=JOB,
                        open_reader=lambda address, port, job: JobStoreReader(store, job=job)) as supervisor:
            supervisor._thread.join(timeout=15)
            declared_by_supervisor = not supervisor._thread.is_alive()
        beating.stop.set()
        assert declared_by_supervisor and supervisor.hang is not None, "the supervisor never judged the job"
        victim.wait(timeout=5)  # ended by the supervisor, not by its sleep
        hang, culprit = supervisor.hang, culprit_of(run, supervisor, 1)
        assert culprit.ranks == [1] and culprit.hosts == {1: HERE}, culprit
        assert hang.reason.startswith(f"rank 0 (on {OTHER}) failed on another machine"), hang.reason
        assert "never reached init_process_group" in culprit.reason, culprit.reason
        assert hang.judged_from == JOB_STORE and sorted(hang.snapshot) == [0, 1]
        assert victim.returncode < 0  # by the supervisor's signals (a stand-in dies of the stack request)
    finally:
        beating.stop.set()
        victim.kill()
        victim.wait()


def test_when_a_rank_here_failed_too_elastic_handles_it_and_the_supervisor_signals_nothing(tmp_path):
    store = HashStore()
    StatusPublisher(store, 0, job=JOB).publish(_rank0_gave_up_in_init(time.time()))
    bystander = subprocess.Popen(["sleep", "60"])
    run = _victims_launcher(tmp_path)
    try:
        failed_here = replace(_rank1_asleep_before_init(bystander.pid, time.time()), phase="failed")
        run.status_file(1).parent.mkdir(parents=True, exist_ok=True)
        run.status_file(1).write_text(json.dumps(to_json(failed_here)))
        StatusPublisher(store, 1, job=JOB).publish(failed_here)
        with Supervisor(run, local_count=1, hang_timeout_s=0.3, grace_s=0.3, job=JOB,
                        open_reader=lambda address, port, job: JobStoreReader(store, job=job)) as supervisor:
            time.sleep(2.0)  # several hang timeouts
        assert supervisor.hang is None and bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()
