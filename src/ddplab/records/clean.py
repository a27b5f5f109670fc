"""What `ddplab clean` (and `env`, and the lab's leftover check) report about processes: the orphans a
launcher marked and left behind, the other processes on the device, what was ended, and the check rows.

The rules that decide who is an orphan live in supervision/procs.py (docs/processes.md); these are only its findings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .codec import FLATTEN, OMIT, SKIP
from .core import ORPHANS_CHECK, Check, Verdict


@dataclass(frozen=True)
class Orphan:
    """A process a launcher marked whose launcher is provably gone."""

    pid: int
    ppid: int
    create_time: float  # with pid, identifies the process (pids are reused)
    age_s: float
    cmdline: str  # the program name only: arguments can carry secrets
    device_mem_bytes: int | None
    run_id: str | None
    reason: str


@dataclass(frozen=True)
class OtherProcess:
    """A process on the device that is not an orphan: shown, never ended unless named."""

    pid: int
    user: str | None
    program: str | None
    create_time: float | None
    age_s: float | None
    device_mem_bytes: int | None
    holds_device_node: bool
    not_orphan_because: str


@dataclass(frozen=True)
class GoneProcess:
    """A pid the user named (`clean --pid N`) that no longer runs."""

    pid: int
    gone: bool = True


@dataclass(frozen=True)
class Survey:
    """Orphans and the other processes holding the device, as procs.survey found them."""

    orphans: list[Orphan]
    other_processes: list[OtherProcess] = field(default_factory=list)  # reports before it listed orphans only

    def checks(self, ended: bool = False) -> list[Check]:
        """The orphan row (a warning while they run; ``ended``: `clean --yes` ended them, its own row judges
        that), and, only when there are some, the informational row of other processes."""
        orphans = len(self.orphans)
        waiting = bool(orphans) and not ended
        rows = [Check(ORPHANS_CHECK, Verdict.WARN if waiting else Verdict.PASS,
                      f"{orphans} (ended below)" if orphans and ended else str(orphans), "0",
                      "ranks a launcher marked whose launcher is provably gone: they hold what the next job needs",
                      "`ddplab clean` lists them, `ddplab clean --yes` ends exactly those" if waiting else "none")]
        if self.other_processes:  # someone's work, not a fault: shown, never a warning by itself
            rows.append(Check("other processes on the device", Verdict.INFO,
                              f"{len(self.other_processes)}: " + ", ".join(
                                  f"{o.pid} {o.program or '?'}" for o in self.other_processes[:5]),
                              "informational", "they share the device (memory, time slices) but are not orphans",
                              "none; `ddplab clean --pid N --yes` ends one you name"))
        return rows


@dataclass(frozen=True)
class Ended:
    """What SIGTERM, then SIGKILL, did to the processes `clean --yes` was asked to end (procs.end)."""

    terminated: list[int]
    killed: list[int]
    survived: list[int]  # e.g. D state: wedged in the driver
    refused: list[int]  # started again since they were listed (pid reused): not signalled

    @property
    def all_gone(self) -> bool:
        return not self.survived and not self.refused


@dataclass(frozen=True)
class CleanRecord:
    survey: Survey = field(metadata=FLATTEN)
    named: Orphan | OtherProcess | GoneProcess | None = None
    ended: Ended | None = None
    memory_returned: bool | None = None  # None: nothing ended, or no per-process device memory here
    memory_still_held: dict[int, int] | None = field(default=None, metadata=OMIT)  # pid -> bytes, after ending
    # The machine it ran on: written at the report's top level, not inside results.
    platform: Any = field(default=None, metadata=SKIP, compare=False)

    @property
    def targets(self) -> list[Orphan | OtherProcess]:
        """What --yes ends (or ended): the named process when one was named, else the orphans."""
        if self.named is None:
            return list(self.survey.orphans)
        return [] if isinstance(self.named, GoneProcess) else [self.named]

    def checks(self) -> list[Check]:
        """The verdict: WARN while something waits for --yes; FAIL when ending it did not work."""
        ended = self.ended is not None
        rows = self.survey.checks(ended) if self.named is None else [self._named_row()]
        if not ended:
            return rows
        e = self.ended
        rows.append(Check("processes ended", Verdict.PASS if e.all_gone else Verdict.FAIL,
                          f"{len(e.terminated)} by SIGTERM, {len(e.killed)} by SIGKILL, {len(e.survived)} survived, "
                          f"{len(e.refused)} refused (pid reused)", "every one gone",
                          "each process listed was signalled only if it still had the start time it was listed with",
                          "none" if e.all_gone else "a survivor is wedged (uninterruptible): the host may need a "
                                                    "reboot; a refused pid was reused: list again"))
        if self.memory_returned is not None:
            rows.append(Check("device memory returned", Verdict.PASS if self.memory_returned else Verdict.FAIL,
                              str(self.memory_returned), "true", "the device no longer reports memory held by the "
                              "ended processes", "none" if self.memory_returned else
                              "the driver still holds it: see memory_still_held, and `ddplab env`"))
        return rows

    def _named_row(self) -> Check:
        named = self.named
        if isinstance(named, GoneProcess):
            return Check(f"named process {named.pid}", Verdict.INFO, "gone", "informational",
                         "the process named with --pid no longer runs", "none")
        waiting = self.ended is None
        return Check(f"named process {named.pid}", Verdict.WARN if waiting else Verdict.PASS,
                     (named.cmdline if isinstance(named, Orphan) else named.program) or "?", "ended with --yes",
                     "the process named with --pid, shown before anything ends it",
                     f"`ddplab clean --pid {named.pid} --yes` ends it" if waiting else "none")

    def summary(self) -> str:
        if self.ended is not None:
            e = self.ended
            return (f"ended {len(e.terminated) + len(e.killed)} process(es), {len(e.survived)} survived, "
                    f"{len(e.refused)} refused")
        if self.named is not None:
            return f"pid {self.named.pid} is gone" if isinstance(self.named, GoneProcess) else \
                f"pid {self.named.pid} listed; nothing ended"
        return (f"{len(self.survey.orphans)} orphan(s), {len(self.survey.other_processes)} other process(es) on "
                "the device")
