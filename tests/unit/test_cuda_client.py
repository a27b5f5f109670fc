"""platform/cuda_client.py, the MPS daemon's first client without torch: what it asks of the driver, how it fails,
and that it stays a standalone script (run by its path with -I, so it imports neither ddplab nor torch)."""

import ast
import ctypes
import subprocess
import sys
from pathlib import Path

import pytest

from ddplab.platform import cuda_client, sharing_daemon
from ddplab.platform.vendors import VENDORS

CLIENT = Path(cuda_client.__file__)


class FakeDriver:
    """The driver functions the client calls, in Python: records each call, answers through the byref arguments."""

    def __init__(self, fail: str | None = None, read_back: int = 1):
        self.calls, self.fail, self.read_back = [], fail, read_back
        self.memory = {}

    def __getattr__(self, name):
        def function(*args):
            self.calls.append(name)
            if name == "cuGetErrorName":
                args[1]._obj.value = b"CUDA_ERROR_MPS_CONNECTION_FAILED"
                return 0
            if name == self.fail:
                return 805
            if name == "cuMemAlloc_v2":
                args[0]._obj.value = 0x1000
            elif name == "cuMemsetD32_v2":
                self.memory[args[0].value] = args[1].value
            elif name == "cuMemcpyDtoH_v2":
                args[0]._obj.value = self.read_back
            return 0
        return function


def _run_with(monkeypatch, driver, indices=("0",)):
    monkeypatch.setattr(ctypes, "CDLL", lambda name: driver if name == "libcuda.so.1" else None)
    cuda_client.main(list(indices))


def test_the_client_takes_each_primary_context_and_writes_and_reads_back(monkeypatch):
    driver = FakeDriver()
    _run_with(monkeypatch, driver, ("0", "1"))
    per_device = ["cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent", "cuMemAlloc_v2", "cuMemsetD32_v2",
                  "cuMemcpyDtoH_v2", "cuMemFree_v2", "cuDevicePrimaryCtxRelease_v2"]
    assert driver.calls == ["cuInit"] + per_device * 2
    assert driver.memory == {0x1000: 1}


def test_a_refused_call_exits_with_the_drivers_error_name(monkeypatch):
    with pytest.raises(SystemExit) as exc:
        _run_with(monkeypatch, FakeDriver(fail="cuDevicePrimaryCtxRetain"))
    assert exc.value.code == "cuDevicePrimaryCtxRetain failed: CUDA_ERROR_MPS_CONNECTION_FAILED (805)"


def test_a_wrong_read_back_is_a_failure(monkeypatch):
    with pytest.raises(SystemExit) as exc:
        _run_with(monkeypatch, FakeDriver(read_back=7), ("3",))
    assert exc.value.code == "device 3: wrote 1, read back 7"


def test_without_a_driver_it_says_so_in_one_line(tmp_path):
    # The CPU machines this runs on have no libcuda.so.1; elsewhere the stand-in path below has none either.
    out = subprocess.run([sys.executable, "-I", str(CLIENT), "0"], capture_output=True, text=True, timeout=60,
                         env={"LD_LIBRARY_PATH": str(tmp_path)}, cwd=tmp_path)
    if out.returncode == 0:
        pytest.skip("this machine has a CUDA driver and a device")
    assert out.returncode == 1
    assert out.stderr.startswith("cannot load the CUDA driver: ") or " failed: CUDA_ERROR_" in out.stderr
    assert "Traceback" not in out.stderr


def test_it_imports_only_the_standard_library_and_is_run_isolated_by_its_path():
    tree = ast.parse(CLIENT.read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert imported == {"ctypes", "sys"}
    assert not any(isinstance(node, ast.ImportFrom) for node in ast.walk(tree))
    nvidia = next(v for v in VENDORS.values() if v.sharing_daemon_client)
    assert (CLIENT.parent / nvidia.sharing_daemon_client) == CLIENT


def test_the_daemon_check_runs_the_script_client_isolated(monkeypatch):
    seen = []

    def fake_run(argv, **kw):
        seen.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(sharing_daemon.subprocess, "run", fake_run)
    nvidia = next(v for v in VENDORS.values() if v.sharing_daemon_client)
    daemon = sharing_daemon.PrivateDaemon(nvidia, Path("/nonexistent"))
    daemon._check_serves_a_client({}, (1, 0, 1))
    assert seen == [[sys.executable, "-I", str(CLIENT), "0", "1"]]
    assert daemon.events == ["served a test client on device(s) 0, 1"]
