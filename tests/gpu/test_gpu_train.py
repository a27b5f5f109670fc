"""GPU behaviour, proven on the device machine (`pytest -m gpu tests/gpu`). CI has no GPU."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import load_json, run_cli

pytestmark = pytest.mark.gpu


def _platform():
    from ddplab.platform import detect

    return detect()


def test_env_reports_built_and_loaded_library(tmp_path):
    out = tmp_path / "env.json"
    proc = run_cli("env", "--json", str(out))
    assert proc.returncode in (0, 1), proc.stderr
    p = load_json(out)["platform"]
    assert p["device_type"] != "cpu" and p["device_count"] >= 1
    assert p["collective_loaded_version"], "the loaded collective library must be identified"
    assert p["devices"][0]["total_bytes"] > 0


def test_shared_device_two_ranks_choose_explain_and_prove(tmp_path):
    out = tmp_path / "out.json"
    proc = run_cli("train", "--nproc", "2", "--share-device", "--json", str(out))
    doc = load_json(out)
    r = doc["results"]
    assert r["shared_device"] is True and r["backend_reason"]
    assert {x["device"] for x in r["ranks"]} == {f"{doc['platform']['device_type']}:0"}
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert r["params_identical"] and r["grad_matches_reference"] and r["local_grad_differs"]
    # the vendor monitor saw both ranks hold device memory
    assert all(x.get("peak_device_mem_bytes") for x in r["ranks"]) or doc["platform"]["per_process_memory_api"] is None


def test_per_device_uses_vendor_backend(tmp_path):
    if _platform().device_count < 2:
        pytest.skip("needs 2 devices")
    out = tmp_path / "out.json"
    proc = run_cli("train", "--nproc", "2", "--per-device", "--json", str(out))
    doc = load_json(out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert doc["results"]["backend"] == doc["platform"]["backend"]
    assert [x["device"] for x in doc["results"]["ranks"]] == [f"{doc['platform']['device_type']}:{i}" for i in (0, 1)]


def test_sigkill_launcher_frees_device_memory(tmp_path):
    from ddplab.platform import open_monitor

    platform = _platform()
    monitor = open_monitor(platform.spec)
    if monitor.api is None:
        pytest.skip("no per-process memory API for this vendor")
    run_dir = tmp_path / "run"
    launcher = subprocess.Popen([sys.executable, "-m", "ddplab", "train", "--nproc", "2", "--steps", "1000000",
                                 "--run-dir", str(run_dir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        pids = []
        while time.monotonic() < deadline:
            pids = [int(p.read_text()) for p in (run_dir / "pids").glob("[0-9]*")]  # not writers' temporaries
            if len(pids) == 2 and all(monitor.sample().process_mem_bytes.get(p) for p in pids):
                break
            time.sleep(0.5)
        assert len(pids) == 2 and all(monitor.sample().process_mem_bytes.get(p) for p in pids)
        os.kill(launcher.pid, signal.SIGKILL)
        launcher.wait(timeout=10)
        time.sleep(3)
        held = {p: monitor.sample().process_mem_bytes.get(p) for p in pids}
        assert not any(held.values()), f"device memory still held after 3 s: {held}"
    finally:
        if launcher.poll() is None:
            launcher.kill()
        monitor.close()


def test_sigkill_of_a_train_on_one_device_leaves_no_rank_and_no_sharing_daemon(tmp_path):
    """Issue 18: SIGKILL of `ddplab train --nproc 2` on one GPU: its ranks and its private sharing daemon (MPS,
    started where the placement chose one) are gone within 3 s: the ranks by their parent-death guard, the daemon by
    the run's guardian (supervision/guardian.py), which stops it through its own pipe."""
    import psutil

    run_dir = tmp_path / "run"
    launcher = subprocess.Popen([sys.executable, "-m", "ddplab", "train", "--nproc", "2", "--share-device",
                                 "--steps", "1000000", "--run-dir", str(run_dir)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)

    def ours() -> list[psutil.Process]:
        found = []
        for proc in psutil.process_iter():
            try:
                env = proc.environ()
            except psutil.Error:
                continue
            if str(run_dir) in env.get("DDPLAB_RUN_DIR", "") + env.get("CUDA_MPS_PIPE_DIRECTORY", ""):
                found.append(proc)
        return [p for p in found if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]

    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and len(list((run_dir / "pids").glob("[0-9]*"))) < 2:
            time.sleep(0.5)
        time.sleep(3)  # the ranks are stepping
        before = ours()
        daemons = [p.name() for p in before if p.name().startswith("nvidia-cuda-mps")]
        print(f"before SIGKILL: {len(before)} processes of the run, sharing daemon processes {daemons}")
        os.kill(launcher.pid, signal.SIGKILL)
        launcher.wait(timeout=10)
        deadline = time.monotonic() + 3
        while ours() and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [(p.pid, p.name()) for p in ours()]
        assert left == [], f"still running 3 s after SIGKILL: {left}"
    finally:
        if launcher.poll() is None:
            launcher.kill()
        for proc in ours():
            proc.kill()
