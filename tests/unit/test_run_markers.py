"""Every supervised job's directory is a run directory (basics/rundir.py): its ranks carry the markers basics/rundir.py
names, so `ddplab clean` judges a `ddplab launch` rank by the same evidence as any ddplab rank (docs/processes.md)."""

from pathlib import Path

from ddplab.supervision.proc_facts import Facts
from ddplab.supervision.procs import classify
from ddplab.basics.rundir import MARKER_ENVS, RunDir

INIT = Facts(pid=1, ppid=0, start_ticks=5, ns_pid=1, create_time=0.0, argv=("/sbin/init",))


def test_a_jobs_ranks_carry_the_run_markers_and_read_their_job_back(tmp_path):
    job = RunDir.create(str(tmp_path / "job"), "launch", option="--out")
    env = job.marker_env(4321, 98765)
    assert set(env) == set(MARKER_ENVS)
    assert RunDir.from_environ(env) == job and job.run_id.startswith("launch-")
    assert job.status_file(3) == job.path / "ranks" / "3" / "status.json"  # one layout for every job


def _rank(env: dict[str, str], ppid: int) -> Facts:
    """A rank of the job, whose directory holds the job's run id (RunDir.create wrote it)."""
    return Facts(pid=500, ppid=ppid, start_ticks=2000, ns_pid=500, create_time=1.0, argv=("python", "train.py"),
                 markers=env, run_dir_holds="launch-x")


def test_a_launched_rank_is_an_orphan_only_once_its_launcher_is_gone():
    env = RunDir(Path("/jobs/j"), "launch-x").marker_env(launcher_pid=300, launcher_start_ticks=1000)
    launcher = Facts(pid=300, ppid=1, start_ticks=1000, ns_pid=300, create_time=0.5, argv=("python", "-m", "ddplab"))
    assert not classify(500, {1: INIT, 300: launcher, 500: _rank(env, ppid=300)}).orphan
    gone = classify(500, {1: INIT, 500: _rank(env, ppid=1)})
    assert gone.orphan and gone.run_id == "launch-x", gone.reason
