"""Processes whose launcher is gone: orphaned ranks that may still hold a device.

A process is listed only with evidence, never by name (the report's
`ps | grep python | xargs kill -9` kills every Python process on the machine):
  - it carries a ddplab run marker (DDPLAB_RUN_ID) and its launcher pid is dead, or
  - it carries torchrun's markers (TORCHELASTIC_RUN_ID) and its parent is init, or
  - it holds device memory (vendor monitor) or device nodes, and its parent is init.
"""

from __future__ import annotations

import glob
import os
import time
from dataclasses import asdict, dataclass

import psutil

from .launch import LAUNCHER_PID_ENV, RUN_ID_ENV
from .platform import DeviceMonitor

TORCHRUN_MARKER = "TORCHELASTIC_RUN_ID"


@dataclass(frozen=True)
class Orphan:
    pid: int
    ppid: int
    create_time: float  # with pid, identifies the process (pids are reused)
    age_s: float
    cmdline: str
    device_mem_bytes: int | None
    run_id: str | None
    reason: str

    def to_dict(self) -> dict:
        return asdict(self)


def find_orphans(monitor: DeviceMonitor | None = None, device_node_globs: tuple[str, ...] = ()) -> list[Orphan]:
    device_mem = monitor.sample().process_mem_bytes if monitor else {}
    device_nodes = {os.path.realpath(p) for g in device_node_globs for p in glob.glob(g)}
    me = os.getpid()
    found = []
    for proc in psutil.process_iter(["pid", "ppid", "create_time", "cmdline"]):
        pid = proc.info["pid"]
        if pid in (me, 1):
            continue
        reason, run_id = _orphan_reason(proc, device_mem.get(pid), device_nodes)
        if reason:
            found.append(Orphan(
                pid=pid,
                ppid=proc.info["ppid"],
                create_time=proc.info["create_time"] or 0.0,
                age_s=round(time.time() - (proc.info["create_time"] or time.time()), 1),
                cmdline=" ".join(proc.info["cmdline"] or [])[:200],
                device_mem_bytes=device_mem.get(pid),
                run_id=run_id,
                reason=reason,
            ))
    return found


def _orphan_reason(proc: psutil.Process, device_mem: int | None, device_nodes: set[str]):
    parent_is_init = proc.info["ppid"] == 1
    env = _environ(proc)
    run_id = env.get(RUN_ID_ENV)
    if run_id:
        launcher = env.get(LAUNCHER_PID_ENV, "")
        if launcher.isdigit() and int(launcher) != proc.pid and not psutil.pid_exists(int(launcher)):
            return f"ddplab rank of run {run_id}; its launcher (pid {launcher}) is gone", run_id
        return None, None
    if parent_is_init and env.get(TORCHRUN_MARKER):
        run = env[TORCHRUN_MARKER]
        return f"torchrun worker (run {run}) whose agent is gone (parent is init)", run
    if parent_is_init and (device_mem or _holds_device_node(proc, device_nodes)):
        return "holds device memory and its parent is gone (parent is init)", None
    return None, None


def _environ(proc: psutil.Process) -> dict[str, str]:
    try:
        return proc.environ()
    except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess, OSError):
        return {}


def _holds_device_node(proc: psutil.Process, device_nodes: set[str]) -> bool:
    if not device_nodes:
        return False
    try:
        fds = os.listdir(f"/proc/{proc.pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{proc.pid}/fd/{fd}") in device_nodes:
                return True
        except OSError:
            continue
    return False


def end(orphans: list[Orphan], grace_s: float = 5.0) -> dict:
    """SIGTERM exactly these processes, SIGKILL what is left after ``grace_s``."""
    procs = []
    for o in orphans:
        try:
            p = psutil.Process(o.pid)
            if abs(p.create_time() - o.create_time) > 1:  # the pid was reused since it was listed
                continue
            procs.append(p)
        except psutil.NoSuchProcess:
            continue
    for p in procs:
        _send(p, "terminate")
    gone, alive = psutil.wait_procs(procs, timeout=grace_s)
    for p in alive:
        _send(p, "kill")
    gone2, still = psutil.wait_procs(alive, timeout=grace_s)
    return {"terminated": sorted(p.pid for p in gone), "killed": sorted(p.pid for p in gone2),
            "survived": sorted(p.pid for p in still)}  # e.g. D state: wedged in the driver


def _send(proc: psutil.Process, how: str) -> None:
    try:
        getattr(proc, how)()
    except psutil.NoSuchProcess:
        pass
