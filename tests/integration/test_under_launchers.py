"""ddplab under the launchers users already have (issue 13): as each of torchrun's workers it runs its workload
as that rank and global rank 0 writes the job's report; under srun or mpirun the mistake of several launchers
per node is refused before anything starts."""

import os
import subprocess
import sys

import pytest

from tests.conftest import load_json, run_cli


@pytest.mark.slow
def test_as_torchruns_workers_ddplab_runs_as_each_rank_and_rank_0_writes_one_report(tmp_path):
    env = dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="200")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           "-m", "ddplab", "train", "--steps", "2", "--run-dir", str(tmp_path / "runs"),
                           "--json", str(tmp_path / "report.json")],
                          capture_output=True, text=True, timeout=240, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = load_json(tmp_path / "report.json")
    r = doc["results"]
    assert doc["verdict"] == "pass" and doc["config"]["launch"]["started_by"] == "torchrun"
    assert r["world_size"] == 2 and r["params_identical"] and r["grad_matches_reference"]
    # one report for the job: every rank in it, though each ran in a process torchrun started
    assert [(x["rank"], x["status"]) for x in r["ranks"]] == [(0, "finished"), (1, "finished")]
    assert "torchrun's store" in r["listen"]["store"] and r["timeseries"]["enabled"] is False
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["rank0", "rank1"]  # a run directory each
    assert proc.stdout.count("verdict: PASS") == 1  # only global rank 0 shows the report


@pytest.mark.parametrize("env, words", [
    ({"SLURM_JOB_ID": "4243", "SLURM_STEP_ID": "0", "SLURM_NNODES": "1", "SLURM_NODEID": "0", "SLURM_NTASKS": "4",
      "SLURM_PROCID": "2", "SLURM_LOCALID": "2", "SLURM_JOB_NODELIST": "gpu7", "SLURM_TASKS_PER_NODE": "4"},
     "srun started 4 tasks on 1 node(s) (4 on this node), and each one is a ddplab launcher starting 2 rank(s) of "
     "its own: 4 independent jobs of world size 2 each, not one job of world size 8"),
    ({"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
      "OMPI_COMM_WORLD_LOCAL_SIZE": "4"},
     "mpirun started 4 processes (4 on this node), and each one is a ddplab launcher starting 2 rank(s) of its own"),
])
def test_several_launchers_per_node_are_refused_with_exit_2_before_anything_starts(tmp_path, env, words):
    proc = run_cli("train", "--nproc", "2", "--run-dir", str(tmp_path / "run"), env=env, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "error: one-launcher-per-rank" in proc.stderr and words in proc.stderr
    assert "hint: start one ddplab per node" in proc.stderr
    assert not (tmp_path / "run").exists()  # refused before the run directory was made
