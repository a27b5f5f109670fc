"""The device-sharing daemon (NVIDIA MPS) for one run: a private one, or the one already running.

Without MPS, processes sharing a GPU time-slice and every collective pays a context switch (docs/shared-device.md).
A private daemon has its own pipe and log directories inside the run directory, only this run's ranks are pointed
at it, and it is stopped afterwards even on failure. A daemon the user started is used as it is, never stopped or
reconfigured. Either way one small client must be served before the ranks start: a daemon whose client crashed
can refuse every new one ("busy or unavailable"), and such a daemon is not used.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from ..errors import EnvironmentUnsupported
from ..basics.proc_stat import start_ticks
from .vendors import Vendor

PIPE_ENV = "CUDA_MPS_PIPE_DIRECTORY"
LOG_ENV = "CUDA_MPS_LOG_DIRECTORY"
DEFAULT_PIPE_DIR = "/tmp/nvidia-mps"  # where clients look when PIPE_ENV is unset
_SOCKET_PATH_MAX = 100  # unix socket paths must stay under ~108 bytes
_CLIENT_TIMEOUT_S = 120.0  # a fresh interpreter (perhaps importing torch) on a busy host, one context per device

# Where the vendor has no torch-free client (Vendor.sharing_daemon_client): one tensor on each device the ranks will
# use, copied back, as the first client a daemon serves.
_TORCH_CLIENT = ("import sys, torch\n"
                 "for index in sys.argv[2:]:\n"
                 "    torch.ones(1, device=f'{sys.argv[1]}:{index}').add_(1).cpu()\n")


class DaemonUnusable(EnvironmentUnsupported):
    """The sharing daemon could not be started, or it refuses clients. Nothing of ours is left running."""

    def __init__(self, message: str):
        super().__init__("sharing-daemon-failed", message)


class PrivateDaemon:
    def __init__(self, vendor: Vendor, directory: Path, marker_env: dict[str, str] | None = None):
        """``directory``: where its pipe and log directories go. ``marker_env``: the run's markers, carried by a
        private daemon so that `ddplab clean` recognises one whose launcher is gone."""
        self.vendor = vendor
        self.root = Path(directory)
        self.marker_env = dict(marker_env or {})
        self.env: dict[str, str] = {}
        self.started = False  # True from the moment ours may exist, so stop() always sweeps it
        self.reused_user_daemon = False
        self.failure: str | None = None
        self.events: list[str] = []
        self._control: str | None = None

    def start(self, device_indices: tuple[int, ...] = (0,)) -> dict[str, str]:
        """Use the running daemon or start a private one; returns the environment the ranks need. Raises
        DaemonUnusable when it cannot start or refuses a client; call stop() either way."""
        try:
            return self._start(device_indices)
        except DaemonUnusable as exc:
            self.failure = exc.message
            self.events.append(f"not used: {exc.message}")
            raise

    def _start(self, device_indices: tuple[int, ...]) -> dict[str, str]:
        if not self.vendor.sharing_daemon_control:
            raise DaemonUnusable(f"{self.vendor.vendor} devices have no sharing daemon ddplab can start")
        if running_daemons(self.vendor):
            self.reused_user_daemon = True
            self.events.append("a sharing daemon was already running (not ours): used as it is, left running")
            self._check_serves_a_client({}, device_indices)
            return {}
        self._control = shutil.which(self.vendor.sharing_daemon_control)
        if not self._control:
            raise DaemonUnusable(f"{self.vendor.sharing_daemon_control} is not on PATH")
        pipe = self._start_private()
        self.events.append(f"started private daemon, pipe {pipe}, log {self.env[LOG_ENV]}")
        self._check_serves_a_client(self.env, device_indices)
        return dict(self.env)

    def _start_private(self) -> Path:
        pipe, log = self.root / "pipe", self.root / "log"
        if len(str(pipe / "control")) > _SOCKET_PATH_MAX:
            pipe = Path(tempfile.mkdtemp(prefix="ddplab-mps-"))
            self.events.append(f"run directory too long for a socket path; pipe directory {pipe}")
        pipe.mkdir(parents=True, exist_ok=True)
        log.mkdir(parents=True, exist_ok=True)
        self.env = {PIPE_ENV: str(pipe), LOG_ENV: str(log)}
        self.started = True
        try:
            subprocess.run([self._control, "-d"], env={**os.environ, **self.marker_env, **self.env}, check=True,
                           timeout=20, capture_output=True, text=True)
        except subprocess.CalledProcessError as exc:
            raise DaemonUnusable(f"`{self._control} -d` exited {exc.returncode}: "
                                 f"{(exc.stderr or exc.stdout or '').strip()[-300:]}") from exc
        except (subprocess.TimeoutExpired, OSError) as exc:
            raise DaemonUnusable(f"`{self._control} -d` failed: {exc}") from exc
        deadline = time.monotonic() + 10
        while not (pipe / "control").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        if not (pipe / "control").exists():
            raise DaemonUnusable(f"the daemon's control pipe {pipe / 'control'} did not appear within 10 s")
        return pipe

    def _check_serves_a_client(self, env: dict[str, str], device_indices: tuple[int, ...]) -> None:
        indices = [str(i) for i in sorted(set(device_indices))]
        if self.vendor.sharing_daemon_client:  # by its path, isolated (-I): neither ddplab nor torch is imported
            client = ["-I", str(Path(__file__).with_name(self.vendor.sharing_daemon_client)), *indices]
        else:
            client = ["-c", _TORCH_CLIENT, self.vendor.device_type, *indices]
        try:
            out = subprocess.run([sys.executable, *client],
                                 env={**os.environ, **env}, capture_output=True, text=True,
                                 timeout=_CLIENT_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise DaemonUnusable(f"a test client got no answer within {_CLIENT_TIMEOUT_S:.0f} s") from exc
        if out.returncode != 0:
            lines = [ln for ln in (out.stderr or out.stdout).splitlines() if ln.strip()]
            raise DaemonUnusable(f"a test client was refused: {lines[-1] if lines else f'exit {out.returncode}'}")
        self.events.append(f"served a test client on device(s) {', '.join(indices)}")

    def stop(self) -> None:
        """Stop ours (quit, then kill what carries our pipe directory); never a daemon we did not start."""
        if not self.started:
            return
        if self._control:
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
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        self.events.append("stopped" if not leftovers else f"killed {len(leftovers)} daemon process(es) after quit")
        self.started = False

    def guardian_entry(self) -> dict | None:
        """How the run's guardian stops this daemon if the launcher dies: its own quit command through its own pipe,
        then its processes by pid and start time. None for a daemon that is not ours."""
        if not self.started or not self._control:
            return None
        pids = [[p.pid, start_ticks(p.pid)] for p in _daemons(self.vendor, self.env[PIPE_ENV])]
        return {"name": self.vendor.multi_rank.sharing_daemon if self.vendor.multi_rank else "sharing daemon",
                "stop": [self._control], "stdin": "quit\n", "env": dict(self.env), "pids": pids}

    def describe(self) -> str:
        return "; ".join(self.events) or "not started"

    def record(self) -> dict:
        return {"name": self.vendor.multi_rank.sharing_daemon if self.vendor.multi_rank else None,
                "private": not self.reused_user_daemon, "used": self.failure is None, "failure": self.failure,
                "env": self.env, "events": self.events}


def stop_leftover(vendor: Vendor, environ: dict[str, str], timeout_s: float = 20) -> bool:
    """Stop a private daemon an earlier ddplab left (`ddplab clean`) with the quit command through its own pipe, as
    its launcher would have. False where that cannot be done: the caller ends its processes instead."""
    control = shutil.which(vendor.sharing_daemon_control or "")
    pipe = environ.get(PIPE_ENV)
    if not control or not pipe:
        return False
    try:
        subprocess.run([control], input="quit\n", text=True, env={**os.environ, PIPE_ENV: pipe}, timeout=timeout_s,
                       capture_output=True)
    except (subprocess.SubprocessError, OSError):
        return False
    deadline = time.monotonic() + timeout_s
    while _daemons(vendor, pipe) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not _daemons(vendor, pipe)


def running_daemons(vendor: Vendor) -> list[psutil.Process]:
    """Sharing daemons this process's children would reach: those on the pipe directory our environment names (or
    the default one). Another run's private daemon is not among them."""
    return _daemons(vendor, os.environ.get(PIPE_ENV, DEFAULT_PIPE_DIR), unreadable_matches=True)


def _daemons(vendor: Vendor, pipe_dir: str, unreadable_matches: bool = False) -> list[psutil.Process]:
    """Sharing-daemon processes started with ``pipe_dir`` (unset counts as the default directory)."""
    found = []
    for proc in psutil.process_iter(["name"]):
        if proc.info.get("name") not in vendor.sharing_daemon_processes:
            continue
        try:
            if proc.environ().get(PIPE_ENV, DEFAULT_PIPE_DIR) == pipe_dir:
                found.append(proc)
        except psutil.AccessDenied:
            if unreadable_matches:  # another user's daemon: cannot tell where it listens, assume the default
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return found
