"""The report's DDP experiment for real: ranks started by elastic, gloo on the CPU."""

from pathlib import Path

import pytest

from tests.conftest import load_json, processes_with_env, run_cli
from tests.netns import namespaces_work  # noqa: F401 - the skip condition's name

pytestmark = pytest.mark.slow


def _train(tmp_path, *args):
    out = tmp_path / "out.json"
    proc = run_cli("train", *args, "--json", str(out), "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    return proc, (load_json(out) if out.exists() else None)


def test_two_ranks_prove_synchronisation(golden_run):
    # The golden train (`train --nproc 2 --steps 2`, tests/golden/commands.py), run once for both tests. Two steps
    # prove what twenty did: every step's gradient is checked against the reference, and the parameters after.
    proc, report = golden_run("train")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = load_json(report)
    assert {"schema_version", "command", "config", "platform", "results", "verdict"} <= set(doc)
    r = doc["results"]
    assert doc["command"] == "train" and doc["verdict"] == "pass"
    assert r["backend"] == "gloo" and "gloo" in r["backend_reason"]
    assert r["shared_device"] is True
    assert r["params_identical"] is True
    assert r["grad_matches_reference"] is True
    assert r["local_grad_differs"] is True  # the check can tell synced from unsynced gradients
    assert [x["rank"] for x in r["ranks"]] == [0, 1]
    assert len({x["pid"] for x in r["ranks"]}) == 2
    for rank in r["ranks"]:
        assert rank["device"] == "cpu" and rank["peak_mem_bytes"] > 0
        assert rank["grad_checks"] == 2  # every step was compared with the reference
        assert len(rank["step_times_us"]) == 2
    assert r["step_time_us"]["n"] == 4 and r["step_time_us"]["p50"] > 0
    assert r["step_time_us"]["p99"] >= r["step_time_us"]["p50"]
    assert doc["platform"]["device_type"] == "cpu"
    # every rank's per-rank log exists in the run directory
    assert len(list(Path(r["run_dir"]).glob("logs/*/attempt_0/*/stderr.log"))) == 2
    assert processes_with_env("DDPLAB_RUN_ID", r["run_id"]) == []


def test_three_ranks_and_mlp(tmp_path):
    proc, doc = _train(tmp_path, "--nproc", "3", "--model", "mlp", "--steps", "4")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    r = doc["results"]
    assert r["world_size"] == 3 and r["params_identical"] and r["grad_matches_reference"]
    assert r["ranks"][0]["num_params"] == 4 * (1024 * 1024 + 1024)


def test_single_rank_has_no_negative_control_but_passes(tmp_path):
    proc, doc = _train(tmp_path, "--nproc", "1", "--steps", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert doc["results"]["local_grad_differs"] is None
    assert doc["results"]["grad_matches_reference"] is True


@pytest.mark.skipif("namespaces_work()", reason="test_multinode_netns.py runs two machines for real here")
def test_two_machines_through_c10d_rendezvous(tmp_path):
    """Two launchers with --nnodes 2 and one endpoint form one job, as two machines would: on one machine's
    loopback, where no network namespaces make real machines (the suite's 2 cores pay for one of the two)."""
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, "-m", "ddplab", "train", "--nnodes", "2", "--nproc", "1",
                               "--rdzv-endpoint", f"127.0.0.1:{port}", "--steps", "3",
                               "--run-dir", str(tmp_path / node), "--json", str(tmp_path / f"{node}.json")],
                              cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for node in ("a", "b")]
    try:
        assert [p.wait(timeout=180) for p in procs] == [0, 0]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    docs = [load_json(tmp_path / f"{node}.json")["results"] for node in ("a", "b")]
    assert [d["world_size"] for d in docs] == [2, 2]
    assert sorted(d["ranks"][0]["rank"] for d in docs) == [0, 1]  # one global rank per machine
    for d in docs:
        assert d["params_identical"] and d["grad_matches_reference"] and d["local_grad_differs"]
