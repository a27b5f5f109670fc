"""A private device-sharing daemon (NVIDIA MPS) for one run.

Without MPS, processes sharing a GPU time-slice and every NCCL collective pays a
context switch (4.5 ms vs 45 us per all_reduce, measured.md). `--mps` starts a
control daemon with its own pipe and log directories inside the run directory, points
only this run's ranks at it, and stops it afterwards even on failure. A daemon the
user started is never stopped or reconfigured, and the device's compute mode is
never changed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psutil

from ..errors import EnvironmentUnsupported
from .vendors import Vendor

PIPE_ENV = "CUDA_MPS_PIPE_DIRECTORY"
LOG_ENV = "CUDA_MPS_LOG_DIRECTORY"
_SOCKET_PATH_MAX = 100  # unix socket paths must stay under ~108 bytes


class PrivateDaemon:
    def __init__(self, vendor: Vendor, run_path: Path):
        self.vendor = vendor
        self.root = Path(run_path) / "mps"
        self.env: dict[str, str] = {}
        self.started = False
        self.reused_user_daemon = False
        self.events: list[str] = []
        self._control = None

    def start(self) -> dict[str, str]:
        """Start the daemon; returns the environment the ranks need to reach it."""
        if not self.vendor.sharing_daemon_control:
            raise EnvironmentUnsupported(
                "no-sharing-daemon", f"{self.vendor.vendor} devices have no sharing daemon ddplab can start (--mps)")
        self._control = shutil.which(self.vendor.sharing_daemon_control)
        if not self._control:
            raise EnvironmentUnsupported(
                "sharing-daemon-missing", f"--mps needs {self.vendor.sharing_daemon_control}, which is not on PATH")
        if _daemons(self.vendor, None):
            self.reused_user_daemon = True
            self.events.append("a sharing daemon was already running (not ours): used as it is, left running")
            return {}
        pipe, log = self.root / "pipe", self.root / "log"
        if len(str(pipe / "control")) > _SOCKET_PATH_MAX:
            pipe = Path(tempfile.mkdtemp(prefix="ddplab-mps-"))
            self.events.append(f"run directory too long for a socket path; pipe directory {pipe}")
        pipe.mkdir(parents=True, exist_ok=True)
        log.mkdir(parents=True, exist_ok=True)
        self.env = {PIPE_ENV: str(pipe), LOG_ENV: str(log)}
        subprocess.run([self._control, "-d"], env={**os.environ, **self.env}, check=True, timeout=20,
                       capture_output=True)
        self.started = True
        deadline = time.monotonic() + 10
        while not (pipe / "control").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.events.append(f"started private daemon, pipe {pipe}, log {log}")
        return dict(self.env)

    def stop(self) -> None:
        if not self.started:
            return
        try:
            subprocess.run([self._control], input="quit\n", text=True, env={**os.environ, **self.env},
                           timeout=20, capture_output=True)
        except (subprocess.SubprocessError, OSError) as exc:
            self.events.append(f"quit command failed: {exc}")
        deadline = time.monotonic() + 15
        while _daemons(self.vendor, self.env[PIPE_ENV]) and time.monotonic() < deadline:
            time.sleep(0.2)
        leftovers = _daemons(self.vendor, self.env[PIPE_ENV])
        for proc in leftovers:  # only processes that carry our private pipe directory
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        self.events.append("stopped" if not leftovers else f"killed {len(leftovers)} daemon process(es) after quit")
        self.started = False

    def describe(self) -> str:
        return "; ".join(self.events) or "not started"

    def record(self) -> dict:
        return {"name": self.vendor.multi_rank.sharing_daemon if self.vendor.multi_rank else None,
                "private": not self.reused_user_daemon, "env": self.env, "events": self.events}


def _daemons(vendor: Vendor, pipe_dir: str | None) -> list[psutil.Process]:
    """Sharing-daemon processes; with ``pipe_dir``, only those started with that pipe directory."""
    found = []
    for proc in psutil.process_iter(["name"]):
        if proc.info.get("name") not in vendor.sharing_daemon_processes:
            continue
        if pipe_dir is None:
            found.append(proc)
            continue
        try:
            if proc.environ().get(PIPE_ENV) == pipe_dir:
                found.append(proc)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return found
