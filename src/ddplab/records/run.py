"""`ddplab run`: what each stage gave (RunRecord); its plan is lab.RunConfig, each stage's command line a
StagePlan."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .clean import Orphan
from .codec import OMIT, SKIP
from .compare import stage_rows
from .core import Check, Report, Verdict


@dataclass(frozen=True)
class StagePlan:
    """One stage as the report shows it: its name and the command line that reproduces it alone."""

    name: str
    command: str  # the measurement's command word
    argv: list[str]


@dataclass(frozen=True)
class StageRecord:
    """What one stage gave: its own report, or why it could not run; the leftovers check has its evidence."""

    name: str
    command: str = ""  # the first lab reports did not record it
    verdict: Verdict = Verdict.PASS
    summary: str = ""
    duration_s: float | None = field(default=None, metadata=OMIT)
    report: Report | None = field(default=None, metadata=OMIT)
    error: str | None = field(default=None, metadata=OMIT)  # the DdplabError reference, or "stage-crashed"
    left_pids: list[int] | None = field(default=None, metadata=OMIT)  # leftovers: processes of this lab alive
    orphans: list[Orphan] | None = field(default=None, metadata=OMIT)  # leftovers: orphans of this lab
    other_orphans: list[Orphan] | None = field(default=None, metadata=OMIT)  # of other runs (information)


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    profile: str = "(not recorded)"  # the first lab reports had one profile only
    stages: list[StageRecord]
    checks: list[Check] = field(default_factory=list)  # the first lab reports had no check rows
    interrupted: bool = False  # the first lab reports could not be interrupted
    duration_s: float | None = None
    out: str = ""
    # Written at the report's top level, not in results: the machine the env stage found, the config as planned.
    platform: Any = field(default=None, metadata=SKIP, compare=False)
    ran_with: Any = field(default=None, metadata=SKIP, compare=False)

    def timed_rows(self, config=None) -> list:
        """Every stage's comparable rows, prefixed with its name where that differs from its command (stage_rows)."""
        return [row for s in self.stages if s.report is not None for row in stage_rows(s.name, s.report)]

    def stage_verdicts(self) -> dict[str, Verdict]:
        return {s.name: s.verdict for s in self.stages}
