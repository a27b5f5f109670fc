"""`ddplab check`'s records: the node's status, one row per check, the numbers the runners chart, and the lab's
stages they were judged from.

Every output a runner reads (the Nagios line, node-problem-detector's message, the Prometheus textfile, JUnit,
the terminal and the JSON report) is made from one CheckRecord, so they cannot disagree.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ..records import Check, Verdict
from ..records.codec import OMIT, OMIT_DEFAULT
from ..records.run import StageRecord


class Status(str, enum.Enum):
    """The health-check runners' scale (Nagios plugin guidelines); its code is Nagios' exit code."""

    OK = "ok"
    WARNING = "warning"
    CRITICAL = "critical"
    UNKNOWN = "unknown"  # could not be judged: a stage could not run here, or the check was cut short

    @property
    def code(self) -> int:
        return _CODES[self]

    @property
    def label(self) -> str:
        return self.name

    @property
    def verdict(self) -> Verdict:
        """ddplab's own scale, for the JSON envelope and the HTML page (UNKNOWN is a stage's "skip")."""
        return {Status.OK: Verdict.PASS, Status.WARNING: Verdict.WARN, Status.CRITICAL: Verdict.FAIL,
                Status.UNKNOWN: Verdict.SKIP}[self]

    @classmethod
    def of(cls, verdict: Verdict) -> "Status":
        """A row's verdict on the runners' scale: INFO judged nothing, so it is no problem of the node (OK)."""
        return {Verdict.PASS: cls.OK, Verdict.WARN: cls.WARNING, Verdict.FAIL: cls.CRITICAL,
                Verdict.SKIP: cls.UNKNOWN, Verdict.INFO: cls.OK}[Verdict(verdict)]

    @staticmethod
    def worst(statuses) -> "Status":
        """CRITICAL over UNKNOWN over WARNING over OK: a node with a known fault is CRITICAL whatever else could
        not be judged, and one where a part could not be judged is not known to be only degraded."""
        return max(statuses, key=_SEVERITY.index, default=Status.OK)


_CODES = {Status.OK: 0, Status.WARNING: 1, Status.CRITICAL: 2, Status.UNKNOWN: 3}
_SEVERITY = [Status.OK, Status.WARNING, Status.UNKNOWN, Status.CRITICAL]
PROBLEMS_ORDER = (Status.CRITICAL, Status.UNKNOWN, Status.WARNING)  # how a runner lists what is not OK


@dataclass(frozen=True)
class Reading:
    """The number a check judged and its bounds, as a runner charts it (Nagios perfdata, a gauge)."""

    value: float
    unit: str  # "GB/s", "us", "s", "" (a count)
    warning: float | None = None
    critical: float | None = None
    floor: bool = False  # True: lower is worse (bandwidth), the bounds are minimums; False: maximums (latency)


@dataclass(frozen=True)
class NodeCheck:
    """One check of the node: a row of a measurement's own checks, or a rule of the expectations."""

    key: str  # stable identifier, e.g. "sweep.collective_results_correct", "busbw.all_reduce.out.32768"
    stage: str
    name: str
    status: Status
    value: str  # what was measured, in words
    threshold: str  # what it was held to
    rule: str  # where the rule comes from: a measurement's own check, the built-in defaults, a file, a baseline
    next_step: str = "none"
    reading: Reading | None = field(default=None, metadata=OMIT)
    duration_s: float | None = field(default=None, metadata=OMIT)  # its stage's
    # The row in ddplab's own words (records.Verdict: PASS, WARN, FAIL, SKIP, INFO), as the terminal and the page
    # show it; ``status`` is the runners' scale. None in reports before it: the status's verdict.
    verdict: Verdict | None = field(default=None, metadata=OMIT)

    @property
    def message(self) -> str:
        """One line: what, how much, against what."""
        return f"{self.stage} {self.name}: {self.value} (expected {self.threshold})"

    @property
    def shown(self) -> Verdict:
        """The row's word in ddplab's vocabulary: what a runner's format says beside its own status (JUnit's
        skipped, an informational row) and what the page shows."""
        return self.verdict if self.verdict is not None else self.status.verdict

    def as_check(self) -> Check:
        return Check(self.name, self.shown, self.value, self.threshold, self.rule, self.next_step, stage=self.stage)


def problems(checks: list[NodeCheck]) -> list[NodeCheck]:
    """The checks that are not OK, worst first (in their order within a status)."""
    return sorted((c for c in checks if c.status is not Status.OK), key=lambda c: PROBLEMS_ORDER.index(c.status))


@dataclass(frozen=True)
class Busbw:
    """One sweep row's bus bandwidth (nccl-tests' definition, GB = 1e9)."""

    op: str
    size_bytes: int
    in_place: bool
    busbw_gbps: float
    time_us: float

    @property
    def placement(self) -> str:
        return "in" if self.in_place else "out"

    @property
    def placement_words(self) -> str:
        return "in-place" if self.in_place else "out-of-place"


@dataclass(frozen=True)
class Latency:
    """The storm's all_reduce: the pipelined mean and the blocking per-op distribution (worst rank), in us."""

    op: str
    size_bytes: int
    mean_us: float
    p50_us: float | None = None
    p90_us: float | None = None
    p99_us: float | None = None
    max_us: float | None = None

    def quantile(self, name: str) -> float | None:
        return getattr(self, f"{name}_us")


@dataclass(frozen=True)
class Metrics:
    """The numbers of the run, taken from the stages' records (judge.metrics_of)."""

    busbw: list[Busbw] = field(default_factory=list)
    latency: Latency | None = None
    copy_ceiling_gbps: float | None = None
    wrong_elements: int | None = None  # over every sweep row; None: no sweep ran
    leftover_processes: int | None = None  # orphans found by the environment survey plus this check's own leftovers

    def largest(self) -> list[Busbw]:
        """Each (collective, placement) at the largest size it was measured at: where busbw means bandwidth."""
        top: dict[tuple[str, bool], Busbw] = {}
        for row in self.busbw:
            key = (row.op, row.in_place)
            if key not in top or row.size_bytes > top[key].size_bytes:
                top[key] = row
        return list(top.values())


@dataclass(frozen=True)
class MachineType:
    """What a thresholds file keys on: device model x device count x collective library and version."""

    device: str
    count: int
    library: str

    def __str__(self) -> str:
        return f"{self.device} x{self.count}, {self.library}"


@dataclass(frozen=True, kw_only=True)
class CheckRecord:
    """`ddplab check`: the node's status, every check, the numbers, and the lab's stages they came from."""

    status: Status
    summary: str  # one line: the status and the worst findings
    machine: MachineType | None  # None: the environment could not be read
    expectations: list[str]  # where the rules came from, in words (built-in, a file's entry, a baseline)
    node_checks: list[NodeCheck]
    metrics: Metrics
    finished_unix: float  # when the check ended (the textfile's last-run timestamp)
    profile: str = "check"
    stages: list[StageRecord] = field(default_factory=list)
    interrupted: bool = False  # stopped before every stage ran: by a stop signal or the check's deadline
    stopped_by: str | None = field(default=None, metadata=OMIT)  # "SIGTERM", "SIGINT", "SIGHUP", "deadline"
    not_run: list[str] = field(default_factory=list, metadata=OMIT_DEFAULT)  # stages a stop left out
    duration_s: float | None = None
    deadline_s: float | None = field(default=None, metadata=OMIT)  # the --deadline it ran under
    out: str = ""
    from_report: str | None = field(default=None, metadata=OMIT)  # judged from this report, nothing was run
    injected: list[str] = field(default_factory=list)  # faults put in on purpose (a test's hidden --inject)

    @property
    def checks(self) -> list[Check]:
        """The rows the HTML page and the terminal show (records.Check)."""
        return [c.as_check() for c in self.node_checks]

    def problems(self) -> list[NodeCheck]:
        return problems(self.node_checks)

    def timed_rows(self, config=None) -> list:
        """The stages' comparable rows, as a lab report's: `ddplab compare` lines two checks up."""
        from ..records.compare import stage_rows

        return [row for s in self.stages if s.report is not None for row in stage_rows(s.name, s.report)]
