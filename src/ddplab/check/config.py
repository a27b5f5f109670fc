"""`ddplab check`'s configuration: where it runs, what it is held to, and (after the environment is known) the
command line of each stage. Validated on construction, as every Config is (config.py); the files it names
(thresholds, baseline, a report to judge) are read and checked by the command before anything starts."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config import MAX_NODES, MAX_NPROC, MAX_TIMEOUT_S, RDZV_HOST_CHOICES, LaunchOptions, StagePlan, check_number
from ..errors import UsageError, invalid_choice
from ..platform.vendors import VENDORS

DEFAULT_TOLERANCE = 0.05
MAX_TOLERANCE = 0.99  # a busbw floor at 1% of the baseline's still means something; 100% means nothing
DEFAULT_STAGE_DEADLINE_S = 60.0
INJECTIONS = ("slow:OP", "wrong:OP", "leftover")


def parse_tolerance(text: str, flag: str) -> float:
    """"5%" or "5" -> 0.05."""
    value = str(text).strip().rstrip("%")
    try:
        tol = float(value) / 100
    except ValueError:
        raise UsageError("invalid-tolerance", f'{flag} "{text}" is not a percentage, e.g. 5%') from None
    check_number(tol * 100, flag, 0, MAX_TOLERANCE * 100, unit="%", reference="invalid-tolerance")
    return tol


@dataclass(frozen=True, kw_only=True)
class CheckConfig:
    """A node acceptance check: env, storm, sweep, ceiling, one drill (and pairwise across machines)."""

    device: str = "auto"
    nproc: int = 2
    """Ranks of the stages on a single device or the host (on 2+ devices: one rank per device)."""
    nnodes: int = 1
    rdzv_endpoint: str | None = None
    rdzv_id: str | None = None
    rdzv_host: str = "auto"
    out: str | None = None
    stage_deadline_s: float = DEFAULT_STAGE_DEADLINE_S
    thresholds: str | None = None
    baseline: str | None = None
    tolerance: float = DEFAULT_TOLERANCE
    critical_tolerance: float | None = None
    from_report: str | None = None
    """Judge this report (a check's or a lab run's) instead of running anything."""
    inject: tuple[str, ...] = ()
    """Faults put in on purpose (tests; hidden option): INJECTIONS."""
    stages: list[StagePlan] = field(default_factory=list)
    """Filled in once the machine is known (the env stage): each stage's command line."""

    def __post_init__(self):
        if self.device not in ("auto", *VENDORS):
            raise invalid_choice("device", self.device, ("auto", *VENDORS))
        check_number(self.nproc, "--nproc", 2, MAX_NPROC, integer=True, unit=" ranks per node")
        check_number(self.nnodes, "--nnodes", 1, MAX_NODES, integer=True)
        check_number(self.stage_deadline_s, "--stage-deadline", 0, MAX_TIMEOUT_S, name="seconds", low_open=True)
        if self.rdzv_host not in RDZV_HOST_CHOICES:
            raise invalid_choice("rdzv_host", self.rdzv_host, RDZV_HOST_CHOICES)
        if self.nnodes > 1:  # the same rules as every command across machines (refused here, before anything)
            self.across()
        check_number(self.tolerance, "--tolerance", 0, MAX_TOLERANCE, reference="invalid-tolerance")
        if self.critical_tolerance is not None:
            check_number(self.critical_tolerance, "--critical-tolerance", 0, MAX_TOLERANCE,
                         reference="invalid-tolerance")
            if self.critical_tolerance < self.tolerance:
                raise UsageError("invalid-tolerance", f"--critical-tolerance {100 * self.critical_tolerance:g}% is "
                                                      f"below --tolerance {100 * self.tolerance:g}%; valid: at least "
                                                      "the warning tolerance")
        for spec in self.inject:
            parse_injection(spec)
        if self.from_report and "leftover" in self.inject:
            raise UsageError("invalid-inject", "--inject leftover starts a real process for the check to find; with "
                                               "--from-report nothing runs: give slow:OP or wrong:OP")

    @property
    def profile(self) -> str:
        """The lab's word for what ran (lab.run_stages records it)."""
        return "check"

    def across(self) -> LaunchOptions | None:
        """The job's launch options across machines (pairwise), or None on one machine."""
        if self.nnodes == 1:
            return None
        return LaunchOptions(nproc=1, device=self.device, nnodes=self.nnodes, rdzv_endpoint=self.rdzv_endpoint,
                             rdzv_id=self.rdzv_id, rdzv_host=self.rdzv_host)

    def to_argv(self) -> list[str]:
        return []


def parse_injection(spec: str) -> tuple[str, str | None]:
    """"slow:all_reduce" -> ("slow", "all_reduce"); "leftover" -> ("leftover", None)."""
    from .plan import OPS

    kind, _, op = spec.partition(":")
    if kind == "leftover" and not op:
        return kind, None
    if kind in ("slow", "wrong") and op in OPS:
        return kind, op
    raise UsageError("invalid-inject", f'--inject "{spec}"; valid: {", ".join(INJECTIONS)} with OP one of '
                                       f'{", ".join(OPS)}')
