"""`ddplab env`, the doctor: what this machine will do with two ranks, where a run would listen, and which
processes hold the device. The platform itself (platform.Platform) is written at the report's top level."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .clean import Survey
from .codec import FLATTEN, OMIT, SKIP
from .library_engine import BindingStatus
from .session import Listened
from .placement import Option


@dataclass(frozen=True)
class ConsideredSetup(Option):
    """One setup the placement policy weighed for ranks sharing a device, and its verdict."""


@dataclass(frozen=True)
class PlannedSetup:
    """What the placement policy chose, when it could plan the ranks at all."""

    backend: str
    env: dict[str, str]  # set in every rank before init
    warnings: list[str]
    memory_fraction: float | None  # allocator cap per rank; None: no cap
    sharing_daemon: str | None = None  # reports before the daemon option have none
    considered: list[ConsideredSetup] = field(default_factory=list)  # nor the options weighed


@dataclass(frozen=True)
class TwoRankPlan:
    """Would the report's experiment work here with 2 ranks in this placement, and why (nothing is started)."""

    nproc: int
    will_work: bool
    reason: str
    # The policy's refusal (a DdplabError's reference): a warning, unlike a machine with too few devices.
    error: str | None = field(default=None, metadata=OMIT)
    planned: PlannedSetup | None = field(default=None, metadata=FLATTEN)

    @property
    def applicable(self) -> bool:
        """The policy planned it, or refused it: the machine has what the placement needs."""
        return self.planned is not None or self.error is not None

    @property
    def warnings(self) -> list[str]:
        return list(self.planned.warnings) if self.planned else []


@dataclass(frozen=True)
class EnvRecord:
    plugin_errors: dict[str, str]  # plug-in module -> why it failed to import
    shared_device: TwoRankPlan
    per_device: TwoRankPlan
    listen: Listened | None = None  # reports before runs were pinned to loopback have none
    survey: Survey = field(default_factory=lambda: Survey([], []), metadata=FLATTEN)
    # Whether the library engine can run here (the binding, and which library copy its calls reach); older: none.
    library_binding: BindingStatus | None = None
    # The machine described: written at the report's top level, not inside results.
    platform: Any = field(default=None, metadata=SKIP, compare=False)
