"""How and when each rank's process ended, seen by its launcher the moment it happened.

The order of deaths is evidence (judge.py), and gloo's victims raise "Connection reset" within milliseconds of a
death, so deaths must be timed to the millisecond; elastic stamps a failure without an error file with its poll's
time in whole seconds. So a thread per rank waits in ``waitid(P_PID, pid, WEXITED | WNOWAIT)``: the kernel wakes
it as the rank ends, and WNOWAIT leaves the child for elastic to reap. Where the rank is not our child (or was
reaped first), the thread notes when it learnt of the end and leaves how to elastic's report.

An OOM kill is read from the cgroup's ``memory.events`` ``oom_kill`` counter and the kernel log (``oom_evidence``).
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..basics.proc_stat import alive

CLD_EXITED, CLD_KILLED, CLD_DUMPED = 1, 2, 3
CGROUP_ROOT = Path("/sys/fs/cgroup")
KMSG = "/dev/kmsg"


@dataclass(frozen=True)
class Exit:
    """One process's end: wall time, and its exit status or signal (both None: not known here)."""

    pid: int
    at: float
    exit_code: int | None
    signal: str | None


class ExitWatch:
    """Waits for each rank's pid to end; ``ends()`` gives what ended so far, by global rank. ``follow`` finds the
    ranks by their pid files every FIND_S: a rank is watched long before it can issue a collective."""

    FIND_S = 0.01

    def __init__(self):
        self._lock = threading.Lock()
        self._watched: dict[int, int] = {}  # pid -> rank
        self._ends: dict[int, Exit] = {}  # rank -> its end
        self._cgroups: dict[int, str] = {}  # pid -> its cgroup's memory.events, read while it lived
        self._oom_baseline: dict[str, int] = {}

    def watch(self, rank: int, pid: int) -> None:
        """Start waiting for ``pid`` (rank ``rank``), once."""
        with self._lock:
            if pid in self._watched:
                return
            self._watched[pid] = rank
        events = memory_events_file(pid)
        if events is not None:
            self._cgroups[pid] = events
            self._oom_baseline.setdefault(events, oom_kills(events) or 0)
        threading.Thread(target=self._wait, args=(rank, pid), name=f"ddplab-exit-{rank}", daemon=True).start()

    def follow(self, run_dir, count: int, stop: threading.Event) -> None:
        """Watch every rank of ``run_dir`` as its pid file appears, until ``count`` are watched or ``stop``."""
        def find() -> None:
            while not stop.is_set():
                for rank, pid in run_dir.rank_pids().items():
                    self.watch(rank, pid)
                if len(self._watched) >= count:
                    return
                stop.wait(self.FIND_S)
        threading.Thread(target=find, name="ddplab-exit-finder", daemon=True).start()

    def ends(self) -> dict[int, Exit]:
        with self._lock:
            return dict(self._ends)

    def oom_evidence(self, pid: int) -> str | None:
        """Why we think the kernel's OOM killer ended ``pid``, or None."""
        events = self._cgroups.get(pid)
        now = oom_kills(events) if events else None
        if now is not None and now > self._oom_baseline.get(events, now):
            return f"cgroup memory.events oom_kill {self._oom_baseline[events]} -> {now} ({events})"
        return kernel_log_names(pid)

    def _wait(self, rank: int, pid: int) -> None:
        exit_code = sig = None
        try:
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
            if info is not None and info.si_code == CLD_EXITED:
                exit_code = info.si_status
            elif info is not None and info.si_code in (CLD_KILLED, CLD_DUMPED):
                sig = signal_name(info.si_status)
        except OSError:  # ChildProcessError: not our child, or reaped already: the end is known, not how
            while alive(pid):  # until it is gone or a zombie (not a child of ours: no waitid)
                time.sleep(0.01)
        with self._lock:
            self._ends.setdefault(rank, Exit(pid, time.time(), exit_code, sig))


def signal_name(number: int) -> str:
    """SIGKILL, SIGABRT ...; "signal N" for a number that names none."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def memory_events_file(pid: int | str) -> str | None:
    """The cgroup v2 ``memory.events`` of a process (None: cgroup v1, unreadable, or no memory controller)."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        hierarchy, _, path = line.partition("::")
        if hierarchy == "0":
            events = CGROUP_ROOT / path.lstrip("/") / "memory.events"
            return str(events) if events.exists() else None
    return None


def oom_kills(events_file: str) -> int | None:
    """The ``oom_kill`` count of a cgroup v2 ``memory.events`` file."""
    try:
        text = Path(events_file).read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return None


_KILLED = re.compile(r"(?:Killed process|oom-kill:.*\bpid=)\s*(\d+)")


def kernel_log_names(pid: int) -> str | None:
    """The kernel log's line saying the OOM killer ended ``pid``, where the log is readable (root)."""
    try:
        fd = os.open(KMSG, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        while True:
            try:
                record = os.read(fd, 8192).decode(errors="replace")
            except BlockingIOError:
                return None
            except OSError:  # EPIPE: a record overwritten while we read; go on
                continue
            if not record:
                return None
            line = record.split(";", 1)[-1].strip()
            found = _KILLED.search(line)
            if found and int(found.group(1)) == pid:
                return f"kernel log: {line[:200]}"
    finally:
        os.close(fd)
