"""What /proc says of a process, read with the standard library alone (the guardian imports nothing more): its
start time in clock ticks since boot (with the pid, one process across pid reuse and from every PID namespace),
whether it is alive, its CPU time, whether it catches a signal, and its children.
"""

from __future__ import annotations

import os


def _fields(pid: int | str) -> list[str] | None:
    """The fields after the command name, which may hold spaces and parentheses: split after the last ')'."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().decode(errors="replace").rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_ticks(pid: int | str = "self") -> int | None:
    """Field 22: the start time in clock ticks since boot. Unlike psutil's create_time (boot time + ticks, moved by
    clock steps) it is the same number for every reader in the same time namespace."""
    fields = _fields(pid)
    try:
        return int(fields[19]) if fields else None
    except (ValueError, IndexError):
        return None


def state(pid: int | str) -> str | None:
    """Field 3, the state letter (R, S, T: stopped, t: traced, Z: zombie...); None where the process is gone."""
    fields = _fields(pid)
    return fields[0] if fields else None


def activity(pid: int | str) -> tuple[str, int] | None:
    """(state letter, CPU time in clock ticks: fields 14 and 15, user and system) in one read; None where gone."""
    fields = _fields(pid)
    try:
        return (fields[0], int(fields[11]) + int(fields[12])) if fields else None
    except (ValueError, IndexError):
        return None


def alive(pid: int | None) -> bool:
    """Running, and not a zombie waiting to be reaped (a zombie is dead for every purpose here)."""
    return pid is not None and state(pid) not in (None, "Z")


def still(pid: int, ticks: int | None) -> bool:
    """Still the process that was seen (the same start time), and running."""
    return ticks is not None and start_ticks(pid) == ticks and alive(pid)


def catches(pid: int | str, signum: int) -> bool | None:
    """Whether the process has a handler for ``signum`` (the SigCgt mask of /proc/PID/status, bit signum - 1); None
    where it cannot be read. A program that exec'd another lost its handlers: the signal's default action (ending
    the process, for most) applies to it again."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except (OSError, ValueError, IndexError):
        return None
    return None


# Linux >= 3.5 built with CONFIG_PROC_CHILDREN (Debian's, Ubuntu's, RHEL's kernels are)
HAS_CHILDREN_FILES = os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def children(pid: int) -> list[int] | None:
    """The children of ``pid``, read from each of its threads' ``children`` file: a few reads, where psutil's
    children() reads the stat file of every process on the machine (most of the launcher's CPU). An empty list
    where the process is gone; None where the kernel has no such files (the caller falls back to psutil)."""
    if not HAS_CHILDREN_FILES:
        return None
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found.extend(int(child) for child in f.read().split())
        except (OSError, ValueError):
            continue  # the thread ended meanwhile: its children went to another thread, read there
    return found


def descendants(pid: int) -> list[int] | None:
    """Every descendant of ``pid`` (children, theirs ...), each once; None as ``children``."""
    out: list[int] = []
    todo = [pid]
    while todo:
        kids = children(todo.pop())
        if kids is None:
            return None
        fresh = [k for k in kids if k not in out]
        out.extend(fresh)
        todo.extend(fresh)
    return out
