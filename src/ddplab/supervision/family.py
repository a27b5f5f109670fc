"""Teardown owns the whole process tree: a job's ranks and everything they started end with the job, on every
path (SIGKILL of the launcher is the guardian's, which reads ``family.json``).

A job's members, by evidence the launcher holds itself: its ranks (pid files and start times); their
descendants, however detached, seen while the watcher polls and kept by pid and start time (the launcher is a
child subreaper while the job runs, so orphans re-parent to it, not to init); and every process carrying the
job's run id. A process that escapes on purpose between two polls may go unseen.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import sys
from dataclasses import dataclass

import psutil

from ..basics.files import write_text_atomic
from .proc_facts import program_name
from ..basics import proc_stat
from ..basics.proc_stat import start_ticks, still
from . import guardian
from .reaping import run_processes
from ..basics.rundir import RunDir

PR_SET_CHILD_SUBREAPER = 36


def set_child_subreaper(on: bool) -> bool:
    """Make this process (not) a child subreaper; False where the kernel or platform cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


@dataclass(frozen=True)
class Member:
    """One process of the job: pid and start time (its identity), and its program for reports."""

    pid: int
    ticks: int | None
    program: str

    def alive(self) -> bool:
        """Still this process (same start time) and not a zombie."""
        return still(self.pid, self.ticks)


class Family:
    """The processes of one job, as this launcher has seen them."""

    def __init__(self, run: RunDir):
        self.run = run
        self.launcher = os.getpid()
        self.members: dict[int, Member] = {}
        self.rank_pids: set[int] = set()
        self._written: set[int] = set()
        self._descendants: set[int] = set()  # seen as a rank's descendant: never a child elastic started
        self._adopted: set[int] = set()

    def refresh(self, rank_pids: dict[int, int]) -> None:
        """Take in the ranks and their descendants now alive; written for the guardian when it changed."""
        self.rank_pids |= set(rank_pids.values())
        for pid in rank_pids.values():
            self.take(pid)
            if pid not in self.members or not self.members[pid].alive():
                continue  # ended, or its pid reused by another process: not the rank's children
            for child in _children(pid, recursive=True):
                self.take(child)
                self._descendants.add(child)
        for pid in self._launchers_adopted():
            self.take(pid)
        if set(self.members) != self._written:
            self._write()

    def marked(self) -> None:
        """Take in every process carrying the run id (a scan of every process: at teardown only)."""
        for pid in run_processes(self.run.run_id):
            self.take(pid)

    def alive(self) -> list[Member]:
        return [m for m in self.members.values() if m.alive()]

    def end(self, members: list[Member], grace_s: float) -> tuple[list[int], list[int], list[int]]:
        """guardian.end, collecting meanwhile the exits of the processes re-parented to this launcher."""
        ended = guardian.end({m.pid: m.ticks for m in members}, grace_s, tick=self.reap_adopted)
        self.reap_adopted()
        return ended

    def reap_adopted(self) -> None:
        """Collect the exit of processes re-parented to this launcher; never a child elastic or subprocess reaps."""
        for pid in list(self._adopted):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                self._adopted.discard(pid)
                continue
            if done:
                self._adopted.discard(pid)

    def take(self, pid: int) -> None:
        """A process proven the job's: a rank, its descendant, one carrying the run id, or by a rank's status file."""
        if pid in self.members or pid == self.launcher:
            return
        ticks = start_ticks(pid)
        if ticks is None:
            return
        try:
            program = program_name(psutil.Process(pid).cmdline())
        except psutil.Error:
            program = ""
        self.members[pid] = Member(pid, ticks, program)

    def _launchers_adopted(self) -> list[int]:
        """Children re-parented to this launcher, seen before as a rank's descendant: only those are reaped here
        (reaping a rank would make elastic read its exit as a success)."""
        adopted = [c for c in _children(self.launcher) if c in self._descendants and c not in self.rank_pids]
        self._adopted |= set(adopted)
        return adopted

    def _write(self) -> None:
        members = [{"pid": m.pid, "ticks": m.ticks} for m in self.members.values()]
        with contextlib.suppress(Exception):  # noqa: BLE001 - the guardian then relies on the run id alone
            write_text_atomic(self.run.family_file, json.dumps(members), durable=False)
            self._written = set(self.members)


def _children(pid: int, recursive: bool = False) -> list[int]:
    """proc_stat's few reads where the kernel has them, else psutil's scan of every process."""
    found = (proc_stat.descendants if recursive else proc_stat.children)(pid)
    if found is not None:
        return found
    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=recursive)]
    except psutil.Error:
        return []
