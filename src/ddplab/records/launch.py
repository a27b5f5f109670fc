"""`ddplab launch`: one supervised job of the user's own, as reported in <job dir>/report.json.

Everything a page about the job needs is here: how it ended and who noticed, each rank's exit and error, the
culprit ranks with the collective and the evidence, where every rank's stacks and flight record are, and what
was still running afterwards. The command line is the report's config (config.LaunchConfig.command_line).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from .core import Check, Verdict

OMIT = {"omit_none": True}
SKIP = {"skip": True}
SUCCEEDED = "succeeded"


@dataclass(frozen=True)
class JobHost:
    """The launcher's machine (the report's "platform" for a job: ddplab probes no device for it)."""

    host: str
    python: str
    torch: str | None


@dataclass(frozen=True)
class RankError:
    """A rank's uncaught exception, as the boot module recorded it (error.json)."""

    rank: int
    type: str
    message: str
    traceback: str
    at: float  # wall time it was recorded


@dataclass(frozen=True)
class Where:
    """Where a rank's main thread was: the torch.distributed call it waited in, the user's line that called it."""

    torch_call: str | None
    call_site: str | None
    frames: list[str]


@dataclass(frozen=True)
class GroupProgress:
    """One process group's flight-recorder counters: the last collective enqueued, started, completed (-1: none)."""

    enqueued: int
    started: int
    completed: int


@dataclass(frozen=True)
class LastStatus:
    """A rank's last heartbeat, as the report keeps it; every key is written, null where the rank never said."""

    phase: str | None = None  # running | finished | raised | exec
    where: Where | None = None
    progress: dict[str, GroupProgress] | None = None  # process group id -> counters
    heartbeat: float | None = None
    in_process_group: bool | None = None
    flight_recorder: str | None = None  # who set the recorder up, in words
    recorder: str | None = None  # the torch call that reads the recorder


@dataclass(frozen=True)
class RankStatus(LastStatus):
    """A rank's status file as its beacon writes it (job/beacon.py; --no-python writes only the first keys)."""

    rank: int | None = None
    local_rank: int | None = None
    pid: int | None = None
    host: str | None = None

    def last_status(self) -> LastStatus:
        return LastStatus(self.phase, self.where, self.progress, self.heartbeat, self.in_process_group,
                          self.flight_recorder, self.recorder)


@dataclass(frozen=True)
class JobRank:
    """One rank of the job: how it ended, its error, its last status and where its evidence is."""

    rank: int
    local_rank: int | None
    pid: int | None
    host: str | None
    ended_by: str | None  # "exit 0", "exit 1", "SIGKILL", "the launcher's teardown", ...
    stopped_by_launcher: bool  # ended by the teardown, not on its own
    exit_code: int | None
    error: RankError | None
    last_status: LastStatus | None
    answered_dump_request: bool
    stacks: str | None  # file: every thread's Python stack, written on request
    fatal_stacks: str | None  # file: faulthandler's stacks (fatal signals, or a rank holding the GIL)
    flight_record: str | None  # file: the rank's flight record


@dataclass(frozen=True)
class CollectiveCall:
    """A collective as the flight records name it; all null for what is not known (e.g. init_process_group)."""

    pg: str | None
    seq: int | None
    op: str | None
    input_sizes: Any  # as the recorder gives them, e.g. [[1024]]
    dtypes: Any  # e.g. ["Float"]


@dataclass(frozen=True)
class Analyzer:
    """Whether torch's own flight-recorder analyzer was used, and why not when it was not."""

    tool: str
    status: str  # used | no finding | not run | unavailable | failed
    why: str | None = field(default=None, metadata=OMIT)
    error: str | None = field(default=None, metadata=OMIT)


@dataclass(frozen=True)
class Culprit:
    """The ranks that held the others up (job/flight.py's rules), the collective, and the evidence."""

    ranks: list[int]
    kind: str  # never-started | behind | desync | never-reached-init | raised | died | frozen | stuck-together
    reason: str
    collective: CollectiveCall | None
    evidence: list[str]
    analyzer: Analyzer


@dataclass(frozen=True)
class JobHang:
    """What the watcher did when it declared a hang (job/watch.py)."""

    declared_at: float
    last_progress_at: float
    no_progress_s: float
    hang_timeout_s: float
    waiting_ranks: list[int]
    dump_request: str  # the id every rank was asked to answer
    answered: list[int]
    signalled_for_stacks: list[int]  # ranks that did not answer: faulthandler's signal wrote their stacks
    terminated: list[int]
    killed: list[int]  # still alive after the grace period

    @property
    def torn_down(self) -> set[int]:
        return set(self.terminated) | set(self.killed)


@dataclass(frozen=True)
class LeftProcess:
    """A process still carrying the job's run id after it ended."""

    pid: int
    cmdline: str


@dataclass(frozen=True)
class LaunchRecord:
    """`ddplab launch`: how the job ended, who noticed, each rank, the culprit, and what was left running."""

    platform_type: ClassVar[type] = JobHost  # what the report's "platform" holds (records.Report.from_json)

    outcome: str  # succeeded | failed | hung | interrupted | launcher-error
    job_dir: str
    run_id: str
    duration_s: float
    detected_at: float | None  # when ddplab knew the job had gone wrong
    detected_by: str | None
    hang: JobHang | None
    culprit: Culprit | None
    torchrun_root_cause_rank: int | None  # the rank torchrun would blame (the first to fail)
    ranks: list[JobRank]
    left_running: list[LeftProcess]
    launcher_error: str | None
    # Derived from the ranks and left_running, written for readers of the JSON.
    stacks: dict[int, str] = field(init=False, default_factory=dict)
    flight_records: dict[int, str] = field(init=False, default_factory=dict)
    nothing_left_running: bool = field(init=False, default=True)
    platform: JobHost | None = field(default=None, metadata=SKIP, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "stacks", {r.rank: r.stacks for r in self.ranks if r.stacks})
        object.__setattr__(self, "flight_records", {r.rank: r.flight_record for r in self.ranks if r.flight_record})
        object.__setattr__(self, "nothing_left_running", not self.left_running)

    @property
    def succeeded(self) -> bool:
        return self.outcome == SUCCEEDED

    def checks(self) -> list[Check]:
        """The verdict: the job succeeded, and nothing it started outlived it."""
        culprit = f"; {self.culprit.reason}" if self.culprit else ""
        left = len(self.left_running)
        return [
            Check("job succeeded", Verdict.PASS if self.succeeded else Verdict.FAIL, f"{self.outcome}{culprit}",
                  SUCCEEDED, "every rank ran the script to its end",
                  "none" if self.succeeded else f"read the culprit's evidence and stacks in {self.job_dir}"),
            Check("nothing left running", Verdict.PASS if not left else Verdict.FAIL,
                  f"{left} process(es)" + "".join(f"; {p.pid} {p.cmdline[:60]}" for p in self.left_running[:3]),
                  "0 processes", "every process the job started is gone",
                  "none" if not left else "`ddplab clean` lists them once their launcher is gone"),
        ]

    def summary(self) -> str:
        text = f"{self.outcome.upper()} in {self.duration_s:.1f} s"
        return f"{text}: {self.culprit.reason}" if self.culprit else text

    def run_ids(self) -> list[str]:
        return [self.run_id]
