"""A process's identity as /proc gives it: its pid AND its start time (pids are reused), and whether it still
runs. The standard library only: the guardian (supervision/guardian.py) starts with nothing else.
"""

from __future__ import annotations


def _stat_fields(pid: int | str) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (which may hold spaces and parentheses)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
        return stat[stat.rindex(")") + 2:].split()
    except (OSError, ValueError):
        return None


def start_ticks(pid: int | str) -> int | None:
    """Field 22 of /proc/PID/stat: start time in clock ticks since boot.

    Unlike psutil's create_time (boot time + ticks, moved by clock steps) it is exactly the same number for every
    reader in the same time namespace.
    """
    fields = _stat_fields(pid)
    try:
        return int(fields[19]) if fields else None
    except (ValueError, IndexError):
        return None


def alive(pid: int | None) -> bool:
    """Running, and not a zombie waiting to be reaped (a zombie is dead for every purpose here)."""
    if pid is None:
        return False
    fields = _stat_fields(pid)
    return bool(fields) and fields[0] != "Z"


def still(pid: int, ticks: int | None) -> bool:
    """Still the process that was seen (the same start time), and running."""
    return ticks is not None and start_ticks(pid) == ticks and alive(pid)
