"""What /proc says about a process, read once (``Facts``): procs.py decides from these which processes are orphans.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import psutil

from ..basics.proc_stat import start_ticks
from ..basics.rundir import LAUNCHER_PID_ENV, LAUNCHER_START_ENV, RUN_DIR_ENV, RUN_ID_ENV, RUN_ID_FILE

TORCHRUN_MARKER = "TORCHELASTIC_RUN_ID"
# What torch's elastic agent writes into every worker's environment besides the run id (a test checks the installed
# torch): all of them together say an agent started the process or one of its workers did.
ELASTIC_WORKER_ENV = ("TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "GROUP_RANK", "ROLE_NAME",
                      "LOCAL_WORLD_SIZE")
_ENV_KEPT = (RUN_ID_ENV, RUN_DIR_ENV, LAUNCHER_PID_ENV, LAUNCHER_START_ENV, TORCHRUN_MARKER, *ELASTIC_WORKER_ENV)
INTERPRETERS = ("python", "pypy")
# Interpreter flags that take no value: skipped to find the script an interpreter runs.
_BARE_INTERPRETER_FLAGS = {"-u", "-B", "-O", "-OO", "-E", "-s", "-S", "-I", "-b", "-bb", "-q", "-P", "-R"}


@dataclass(frozen=True)
class Facts:
    """One process as /proc showed it. ``markers`` holds only the launcher variables."""

    pid: int
    ppid: int  # 0: the parent is outside this PID namespace
    start_ticks: int | None  # clock ticks after boot: the same value from every PID namespace
    ns_pid: int | None  # its pid inside its own PID namespace (last NSpid entry)
    create_time: float
    argv: tuple[str, ...] = ()  # kept in memory to recognise launchers; reports get program_name() only
    name: str = ""
    user: str | None = None
    markers: Mapping[str, str] = field(default_factory=dict)
    same_clock: bool = True  # in our time namespace, so its recorded start times compare with ours
    # The run id held by the run directory its DDPLAB_RUN_DIR names, read through its own root; None: not read.
    run_dir_holds: str | None = None

    @property
    def program(self) -> str:
        return program_name(self.argv) or self.name


def program_name(argv: Sequence[str]) -> str:
    """The program, never its arguments: `python train.py --hf-token X` -> `python train.py`; an interpreter's is
    the script or module it runs (the code of `python -c` is dropped)."""
    if not argv:
        return ""
    prog = os.path.basename(argv[0])
    if not prog.startswith(INTERPRETERS):
        return prog
    rest = list(argv[1:])
    while rest and rest[0] in _BARE_INTERPRETER_FLAGS:
        rest.pop(0)
    if not rest:
        return prog
    if rest[0] == "-m" and len(rest) > 1:
        return f"{prog} -m {rest[1]}"
    if rest[0] == "-c":
        return f"{prog} -c"
    if not rest[0].startswith("-"):
        return f"{prog} {os.path.basename(rest[0])}"
    return prog


def ns_pid(pid: int) -> int | None:
    """The pid a process has inside its own PID namespace (what its os.getpid() returns)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    return None


def _time_namespace(pid: int | str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/time")
    except OSError:
        return None


def snapshot() -> dict[int, Facts]:
    """Every live process we can see (zombies left out: they hold nothing and cannot be ended)."""
    ours = _time_namespace("self")
    table = {}
    for proc in psutil.process_iter(["pid", "ppid", "create_time", "cmdline", "name", "username", "status"]):
        info = proc.info
        if info["status"] == psutil.STATUS_ZOMBIE or info["create_time"] is None:
            continue
        env = _environ(proc)
        table[info["pid"]] = Facts(
            pid=info["pid"], ppid=info["ppid"] or 0, start_ticks=start_ticks(info["pid"]), ns_pid=ns_pid(info["pid"]),
            create_time=info["create_time"], argv=tuple(info["cmdline"] or ()), name=info["name"] or "",
            user=info["username"], markers={k: env[k] for k in _ENV_KEPT if k in env},
            same_clock=_time_namespace(info["pid"]) == ours,
            run_dir_holds=run_dir_holds(info["pid"], env.get(RUN_DIR_ENV)))
    return table


def run_dir_holds(pid: int, run_dir: str | None) -> str | None:
    """The run id in ``run_dir``'s run-id file as process ``pid`` sees it (through /proc/PID/root), or None."""
    if not run_dir or not os.path.isabs(run_dir):
        return None
    try:
        with open(f"/proc/{pid}/root{run_dir}/{RUN_ID_FILE}", errors="replace") as f:
            return f.read(256).strip() or None
    except OSError:
        return None


def _environ(proc: psutil.Process) -> dict[str, str]:
    try:
        return proc.environ()
    except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess, OSError):
        return {}
