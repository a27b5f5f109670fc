"""Issue 19: a collective and a drill ddplab does not ship, each one file registered through the public registries
(collectives.register, drills.register), run for real on CPU: a short sweep of the toy collective (its ranks
inherit the registration) and the toy drill through the drill measurement's library call."""

import os
from pathlib import Path

import pytest

import ddplab
from ddplab import collectives, drills, measurements
from ddplab.records.config import LaunchOptions
from ddplab.measurements.drill import DrillConfig
from ddplab.records import Verdict
from tests.conftest import load_json, processes_with_env, run_cli

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
# the launcher and its ranks import the toys from the repository root, ddplab from the code under test
PYTHONPATH = os.pathsep.join([str(Path(ddplab.__file__).resolve().parents[1]), str(ROOT)])


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setattr(collectives, "COLLECTIVES", dict(collectives.COLLECTIVES))
    monkeypatch.setattr(drills, "DRILLS", dict(drills.DRILLS))
    monkeypatch.setenv(collectives.PLUGINS_ENV, "")
    collectives.register("toy_max", "tests.toy_collective")
    drills.register("toy_kill", "tests.toy_drill")


def test_a_toy_collective_is_swept_timed_and_checked(registered, tmp_path):
    assert os.environ[collectives.PLUGINS_ENV] == "toy_max=tests.toy_collective"
    out = tmp_path / "sweep.json"
    proc = run_cli("sweep", "--nproc", "2", "--ops", "toy_max", "-b", "8", "-e", "64", "-f", "8", "-n", "2", "-w", "1",
                   "--json", str(out), cwd=tmp_path, env={"PYTHONPATH": PYTHONPATH})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = load_json(out)
    rows = doc["results"]["rows"]
    assert [(r["op"], r["size_bytes"], r["num_wrong"]) for r in rows] == [("toy_max", 8, 0), ("toy_max", 64, 0)]
    assert all(r["busbw_gbps"] == pytest.approx(r["algbw_gbps"], rel=1e-3) for r in rows)  # 2(n-1)/n = 1 at n=2
    table = [t for t in (line.split() for line in proc.stdout.splitlines()) if len(t) > 4 and t[0].isdigit()
             and t[1].isdigit()]
    assert [(t[0], t[3], t[4]) for t in table] == [("8", "max", "-1"), ("64", "max", "-1")]  # redop, root: the spec's
    assert processes_with_env("DDPLAB_RUN_ID", doc["results"]["run_id"]) == []


def test_a_toy_drill_names_the_killed_rank(registered, tmp_path):
    config = DrillConfig(drills=("toy-kill",), launch=LaunchOptions(nproc=2, timeout_s=6.0, run_dir=str(tmp_path)))
    record = measurements.get("drill").run(config)
    [outcome] = record.drills
    assert (outcome.drill, outcome.verdict) == ("toy_kill", Verdict.PASS), outcome
    assert outcome.culprit_ranks == [1] and outcome.leaked_pids == []
