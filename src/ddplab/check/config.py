"""`ddplab check`'s configuration: where it runs, what it is held to, and (once the environment is known) the
command line of each stage. Validated on construction; the files it names are read by the command before anything
starts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ..basics import validators
from ..basics.cli_options import Range, check_fields, option
from ..records.config import DEVICES, RDZV_HOST_CHOICES, SECONDS, LaunchOptions
from ..errors import UsageError
from ..records.run import StagePlan
from ..basics.validators import MAX_NODES, MAX_NPROC, percent_text

DEFAULT_TOLERANCE = 0.05
MAX_TOLERANCE = 0.99  # a busbw floor at 1% of the baseline's still means something; 100% means nothing
DEFAULT_STAGE_DEADLINE_S = 60.0
# Slurm kills a HealthCheckProgram that runs past 60 s. The check ends itself 10 s before that, so that stopping the
# running stage's ranks, the leftover check and writing the report and the runner's files still fit.
DEFAULT_DEADLINE_S = 50.0
INJECTIONS = ("slow:OP", "wrong:OP", "leftover")
TOLERANCE = Range(0, MAX_TOLERANCE, reference="invalid-tolerance")


def parse_tolerance(text: str, flag: str) -> float:
    """"5%" or "5" -> 0.05, at most MAX_TOLERANCE."""
    return validators.parse_tolerance(text, flag, MAX_TOLERANCE * 100)


@dataclass(frozen=True, kw_only=True)
class CheckConfig:
    """A node acceptance check: env, storm, sweep, ceiling, one drill (and pairwise across machines)."""

    device: str = option("--device", default="auto", choices=DEVICES)
    """Device type, or auto for the detected accelerator (cpu when none)."""
    nproc: int = option("--nproc", default=2, range=Range(2, MAX_NPROC, unit=" ranks per node"))
    """Ranks of the stages on a single device or the host (on 2+ devices: one rank per device)."""
    nnodes: int = option("--nnodes", default=1, range=Range(1, MAX_NODES))
    """Machines in the job, each running this check: pairwise between them; under srun: the nodes it started,
    unless given."""
    rdzv_endpoint: str | None = option("--rdzv-endpoint", default=None, metavar="HOST:PORT")
    """HOST:PORT of the rendezvous, the same on every machine; default: under srun, the first node."""
    rdzv_id: str | None = option("--rdzv-id", default=None)
    """Several machines: the job's name, the same on every machine; default: derived from the endpoint."""
    rdzv_host: str = option("--rdzv-host", default="auto", choices=RDZV_HOST_CHOICES)
    """Several machines: host the rendezvous store here? auto: when the endpoint is one of this machine's
    addresses (under srun: node 0)."""
    out: str | None = option("--out", default=None, metavar="DIR")
    """Output directory, new or empty; default: ./ddplab-runs/check-<id>."""
    stage_deadline_s: float = option("--stage-deadline", default=DEFAULT_STAGE_DEADLINE_S, range=SECONDS)
    """Seconds without progress before a stage's ranks are cut."""
    deadline_s: float = option("--deadline", default=DEFAULT_DEADLINE_S, range=SECONDS, metavar="S")
    """Seconds from ddplab's start after which the check stops itself (the running stage's ranks ended, the stages
    after it not run) and says UNKNOWN, naming what was not run; under the 60 s after which Slurm kills a
    HealthCheckProgram, with 10 s left to stop and write the report (a check of 8 devices needs a larger value and
    a runner that allows it)."""
    thresholds: str | None = option("--thresholds", default=None, metavar="FILE")
    """TOML file of busbw and latency bounds per machine type; default: the built-in bounds."""
    baseline: str | None = option("--baseline", default=None, metavar="REPORT")
    """A good node's check (or lab) report to hold this one to; default: none."""
    tolerance: float = option("--tolerance", default=DEFAULT_TOLERANCE, range=TOLERANCE, parse=parse_tolerance,
                              show=percent_text)
    """--baseline: how far busbw and copy rate may fall, and latency rise, before a WARNING."""
    critical_tolerance: float | None = option("--critical-tolerance", default=None, range=TOLERANCE,
                                              parse=parse_tolerance, show=percent_text)
    """--baseline: beyond this, CRITICAL; default: never."""
    from_report: str | None = option("--from-report", default=None, metavar="REPORT")
    """Judge this report (a check's or a lab run's) instead of running anything; default: run the check."""
    inject: tuple[str, ...] = option("--inject", default=(), repeat=True, hidden=True)
    """Faults put in on purpose (tests; hidden option): INJECTIONS."""
    stages: list[StagePlan] = field(default_factory=list)
    """Filled in once the machine is known (the env stage): each stage's command line."""
    profile: ClassVar[str] = "check"  # the lab's word for what ran (lab.run_stages records it)

    def __post_init__(self):
        check_fields(self)
        if self.nnodes > 1:  # the same rules as every command across machines (refused here, before anything)
            self.across()
        if self.critical_tolerance is not None and self.critical_tolerance < self.tolerance:
            raise UsageError("invalid-tolerance", f"--critical-tolerance {100 * self.critical_tolerance:g}% is "
                                                  f"below --tolerance {100 * self.tolerance:g}%; valid: at least "
                                                  "the warning tolerance")
        for spec in self.inject:
            parse_injection(spec)
        if self.from_report and "leftover" in self.inject:
            raise UsageError("invalid-inject", "--inject leftover starts a real process for the check to find; with "
                                               "--from-report nothing runs: give slow:OP or wrong:OP")

    def across(self) -> LaunchOptions | None:
        """The job's launch options across machines (pairwise), or None on one machine."""
        if self.nnodes == 1:
            return None
        return LaunchOptions(nproc=1, device=self.device, nnodes=self.nnodes, rdzv_endpoint=self.rdzv_endpoint,
                             rdzv_id=self.rdzv_id, rdzv_host=self.rdzv_host)


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
