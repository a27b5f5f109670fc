"""Two launchers of one job on one machine (issue 11's multi-machine culprit test): `ddplab drill late_rank
--nnodes 2 --nproc 1` twice against one rendezvous. The launcher that holds global rank 1, the victim, has a
supervisor that watches only its own rank; it must name global rank 1, never "rank 0 never started".

late_rank, not stall: a drill of one session per launcher. stall and straggler launch twice, and two
launchers do not meet again reliably for the second session on one rendezvous endpoint.
"""

import os
import socket
import subprocess
import sys

import pytest

from tests.conftest import load_json

pytestmark = pytest.mark.slow
TIMEOUT = "6"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_victims_launcher_names_global_rank_1(tmp_path):
    endpoint = f"127.0.0.1:{_free_port()}"
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
    victim_side = by_rank[1]
    hang = victim_side["session"]["hang"]
    assert hang["culprit_ranks"] == [1] and "never started" not in hang["reason"], hang["reason"]
    assert victim_side["culprit_ranks"] == [1] and victim_side["injected"]["rank"] == 1
    assert victim_side["verdict"] == "pass" and victim_side["leaked_pids"] == []
    # The other launcher saw no fault go in on its machine: a drill that did not inject fails there.
    assert by_rank[0]["injected"]["at"] is None and by_rank[0]["verdict"] == "fail"
    assert by_rank[0]["leaked_pids"] == []
