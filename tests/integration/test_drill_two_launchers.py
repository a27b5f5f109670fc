"""Two launchers of one job on one machine (issue 11's multi-machine culprit test): `ddplab drill late_rank
--nnodes 2 --nproc 1` twice against one rendezvous. Global rank 1, the victim, runs under the second launcher.
Since issue 13 every rank's status also goes through the job's store, so BOTH launchers judge the whole job:
each names global rank 1 (never "rank 0 never started"), sees the fault go in, and passes. Before it, the
first launcher saw only its own rank 0 and failed the drill ("nothing was injected here").

late_rank, not stall: the quicker drill (stall across machines is tested in the network namespaces,
test_node_drills_netns.py).

Which launcher hosts the rendezvous store is a start-up race. When it is the victim's, that launcher's elastic
agent never sees rank 0 time out in init (it acts only on its own ranks, and its store still answers). Before,
its supervisor then stopped judging too, and the late rank slept out its delay (a minute), joined init and
failed there as well. Now the supervisor ends it one hang timeout after rank 0's failure is seen, naming rank 1
(tests/unit/test_supervisor_failure_elsewhere.py decides this without processes). Both orders must name rank 1,
and neither launcher may wait for the late rank's delay to run out.
"""

import os
import subprocess
import sys

import pytest

from tests.conftest import free_loopback_port, load_json

pytestmark = pytest.mark.slow
TIMEOUT = "6"
LATE_S = float(TIMEOUT) + 60  # the late rank's delay before init (drills/runner.py: late_s)


def test_the_victims_launcher_names_global_rank_1(tmp_path):
    endpoint = f"127.0.0.1:{free_loopback_port()}"
    env = dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="200")
    launchers = []
    for name in ("first", "second"):
        argv = [sys.executable, "-m", "ddplab", "drill", "late_rank", "--nnodes", "2", "--nproc", "1",
                "--rdzv-endpoint", endpoint, "--victim", "1", "--timeout", TIMEOUT,
                "--run-dir", str(tmp_path / name), "--json", str(tmp_path / f"{name}.json")]
        launchers.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                          cwd=tmp_path))
    for launcher in launchers:
        launcher.wait(timeout=240)
    drills = [load_json(tmp_path / f"{name}.json")["results"]["drills"][0] for name in ("first", "second")]
    by_rank = {d["session"]["ranks"][0]["rank"]: d for d in drills}
    assert sorted(by_rank) == [0, 1]  # one rank each, numbered as one job
    for rank, drill in by_rank.items():  # both launchers: the one with the victim, and the other
        assert drill["culprit_ranks"] == [1], (rank, drill["culprit_reason"])
        assert "never started" not in drill["culprit_reason"], (rank, drill["culprit_reason"])
        assert drill["injected"]["rank"] == 1 and drill["injected"]["at"] is not None, rank
        assert drill["verdict"] == "pass" and drill["leaked_pids"] == [], (rank, drill)
        assert drill["culprit_hosts"] == {"1": "127.0.0.1"}  # the machine: its address toward the endpoint
        # the late rank was ended by a launcher, not by its own delay running out (wherever the store was)
        assert drill["session"]["duration_s"] < LATE_S - 10, (rank, drill["session"]["duration_s"])
