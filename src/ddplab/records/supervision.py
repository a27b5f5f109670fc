"""What supervising a multi-rank job produces, for every kind of job (a lab stage, a drill, `ddplab launch`):
each rank's status as its beacon writes it, how each rank's process ended, the hang the watcher declared and the
culprit the judge named. One set of records, written by one supervisor (ddplab/supervision/), so a drill that
passes proves what a user's job gets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .codec import OMIT, OMIT_DEFAULT


@dataclass(frozen=True)
class Where:
    """Where a rank's main thread was: the torch.distributed call it waited in, the user's line that called it."""

    torch_call: str | None
    call_site: str | None
    frames: list[str]
    # inside an import (importlib's frames anywhere in its stack): a rank still loading its code is slow, not late
    importing: bool = field(default=False, metadata=OMIT_DEFAULT)
    modules: int | None = field(default=None, metadata=OMIT)  # how many modules it had loaded (sys.modules)


@dataclass(frozen=True)
class GroupProgress:
    """One process group's flight-recorder counters: the last collective enqueued, started, completed (-1: none)."""

    enqueued: int
    started: int
    completed: int


@dataclass(frozen=True, kw_only=True)
class RankState:
    """One rank's status: its status.json on its machine and, across machines, its record in the job's store
    (supervision/beacon.py writes both). Progress is told by the collectives a lab workload counts (``seq``, ``done``)
    and by the flight recorder's counters per process group (``progress``: all a user's script gives); ``where`` is the
    main thread's location, read from a side thread."""

    rank: int
    local_rank: int | None = None  # reports before ranks were numbered per machine have none
    pid: int
    phase: str  # before-init | in-init | running | in-collective | timing | stalled | exec | finished | failed
    seq: int = 0
    done: int = 0
    op: str | None = None
    numel: int | None = None
    since: float = 0.0
    heartbeat: float = 0.0
    error: str | None = None
    failed_at: float | None = None
    failed_in: str | None = field(default=None, metadata=OMIT)  # the phase it failed in (absent in older reports)
    # When it entered the phase it failed in (its ``since`` then): tells a rank that waited there before the others
    # gave up from one that arrived after they had (supervision/states.py). Absent in older reports.
    failed_in_since: float | None = field(default=None, metadata=OMIT)
    injected: str | None = None
    injected_at: float | None = None
    # Where the rank runs, for a supervisor on another machine (absent in older reports).
    world_size: int | None = field(default=None, metadata=OMIT)
    node_rank: int | None = field(default=None, metadata=OMIT)
    host: str | None = field(default=None, metadata=OMIT)  # its hostname
    address: str | None = field(default=None, metadata=OMIT)  # its machine's address toward the endpoint
    beat: int | None = field(default=None, metadata=OMIT)  # counts writes: a reader elsewhere sees it move
    # What the beacon observes from its side thread (one beacon for every job). Absent before.
    proc_start_ticks: int | None = field(default=None, metadata=OMIT)  # with pid: this process, not a reused pid
    where: Where | None = field(default=None, metadata=OMIT)
    progress: dict[str, GroupProgress] | None = field(default=None, metadata=OMIT)  # process group -> counters
    # since when (its beacon's clock) the same collectives have been pending in ``progress``; None: none pending
    pending_since: float | None = field(default=None, metadata=OMIT)
    in_process_group: bool | None = field(default=None, metadata=OMIT)
    flight_recorder: str | None = field(default=None, metadata=OMIT)  # who set the recorder up, in words
    recorder: str | None = field(default=None, metadata=OMIT)  # the torch call that reads the recorder
    stack_signal: int | None = field(default=None, metadata=OMIT)  # faulthandler's signal for its stacks
    exit_code: int | None = field(default=None, metadata=OMIT)  # the status it was about to exit with
    command: list[str] | None = field(default=None, metadata=OMIT)  # --no-python: what it exec'd

    @property
    def node_base(self) -> int:
        """The global rank of this machine's local rank 0 (elastic numbers each machine's ranks in a block)."""
        return self.rank - (self.local_rank or 0)

    @property
    def machine(self) -> str | None:
        """The machine it runs on: its address toward the endpoint where known (network namespaces and
        containers may all share one hostname), else its hostname."""
        return self.address or self.host

    @property
    def torch_call(self) -> str | None:
        return self.where.torch_call if self.where else None


@dataclass(frozen=True)
class RankError:
    """A rank's uncaught exception, as its boot recorded it (ranks/<rank>/error.json)."""

    rank: int
    type: str
    message: str
    traceback: str
    at: float  # wall time it was recorded


@dataclass(frozen=True)
class RankEnd:
    """How a rank's process ended, as its launcher saw it the moment it happened (supervision/exits.py)."""

    rank: int
    pid: int | None
    at: float | None  # wall time of the exit; None: only elastic's report of it is known
    exit_code: int | None  # None when a signal ended it
    signal: str | None  # SIGKILL, SIGSEGV ...
    by_launcher: bool  # the launcher signalled it (ddplab's teardown, or elastic's after another rank failed)
    oom_killed: str | None = field(default=None, metadata=OMIT)  # the kernel's OOM killer did it: the evidence

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.signal is None

    def in_words(self) -> str:
        """exit 3, SIGSEGV, SIGKILL (the kernel's OOM killer: ...), SIGTERM (the launcher's teardown), signal 38 (sent
        by the launcher: any other signal it sent, e.g. the stack signal to a process that no longer catches it)."""
        how = self.signal or (f"exit {self.exit_code}" if self.exit_code is not None else "ended (status not seen)")
        if self.oom_killed:
            return f"{how} (the kernel's OOM killer: {self.oom_killed})"
        if not self.by_launcher:
            return how
        return f"{how} (sent by the launcher)" if self.signal not in (None, "SIGTERM", "SIGKILL") else \
            f"{how} (the launcher's teardown)"


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
    """The ranks that held the others up (supervision/judge.py's rules), the collective, and the evidence."""

    ranks: list[int]
    kind: str  # never-started | failed-at-start | desync | raised | died | oom-killed | behind |
    #            never-reached-init | frozen | not-in-collective | stuck-together
    reason: str
    collective: CollectiveCall | None
    evidence: list[str]
    analyzer: Analyzer
    # a job across machines: each culprit's machine (rank -> machine, its address toward the endpoint)
    hosts: dict[int, str | None] | None = field(default=None, metadata=OMIT)

    @classmethod
    def from_earlier_hang(cls, hang: dict) -> dict | None:
        """Older reports kept the lab's culprit inside its hang record: as this record, in JSON."""
        if not isinstance(hang, dict) or "culprit_ranks" not in hang:
            return None
        return {"ranks": hang["culprit_ranks"], "kind": "named by an earlier ddplab", "reason": hang.get("reason", ""),
                "collective": None, "evidence": [], "analyzer": {"tool": "ddplab", "status": "not run"},
                "hosts": hang.get("culprit_hosts")}

    def in_words(self) -> str:
        """rank 3 (on 10.9.0.2), rank 1: the culprits with their machines where known."""
        hosts = self.hosts or {}
        return ", ".join(f"rank {r}" + (f" (on {hosts[r]})" if hosts.get(r) else "") for r in self.ranks)


@dataclass(frozen=True)
class RasAnswer:
    """What the collective library's RAS service said when the hang was declared (--ras; job/ras.py)."""

    service: str | None  # e.g. "NCCL RAS"; None: this platform's library has none
    status: str  # answered | not asked | unreachable | no answer | cut off | unexpected answer
    why: str | None  # for every status but "answered"
    address: str | None  # host:port asked (or that would have been)
    library_version: str | None  # the collective library's version, as ddplab's launcher found it
    sent: list[str]  # the protocol lines, in order
    format: str | None  # json | text: what the answer is written in
    answer: str  # the service's words, raw ('' when it said nothing)
    seconds: float | None  # from connecting to the end of the answer


@dataclass(frozen=True, kw_only=True)
class Hang:
    """What the watcher did when it declared a hang: no rank progressed for the hang timeout while a rank waited.
    Who is to blame is the judge's (``Culprit``)."""

    declared_at: float
    last_progress_at: float
    no_progress_s: float
    hang_timeout_s: float
    reason: str  # why it is a hang, in words
    waiting_ranks: list[int]
    snapshot: dict[int, RankState] = field(default_factory=dict)  # each rank's status when it was declared
    dump_request: str | None = None  # the id every rank was asked to answer
    answered: list[int] = field(default_factory=list)
    # did not answer, py-spy could not read them, and they catch faulthandler's signal: it wrote their stacks
    signalled_for_stacks: list[int] = field(default_factory=list)
    stacks: dict[int, str] = field(default_factory=dict)  # rank -> stack file
    # The ranks that did not answer, read from outside by py-spy (supervision/outside_stacks.py): rank -> its file,
    # and how that went in words, or why no rank was read (py-spy not installed); empty when every rank answered.
    py_spy_stacks: dict[int, str] = field(default_factory=dict, metadata=OMIT_DEFAULT)
    py_spy: str | None = field(default=None, metadata=OMIT)
    terminated: list[int] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)  # still alive after the grace period
    ras: RasAnswer | None = field(default=None, metadata=OMIT)  # None: --ras was not given
    judged_from: str | None = field(default=None, metadata=OMIT)  # "the job's store" | "this machine's files"
    followed: str | None = field(default=None, metadata=OMIT)  # the machine that declared it first (several machines)
    # when the watcher began ending the job's processes: what a rank said or wrote after it (a SIGTERM handler that
    # calls a collective, an error raised by the signal) is the teardown's doing, not evidence of the hang
    ended_at: float | None = field(default=None, metadata=OMIT)

    @staticmethod
    def json_upgrade(data: dict) -> dict:
        """Older reports, from before one supervisor served every job, kept two hang records: the lab's
        (detected_at, culprit_ranks, reason, killed_after_grace) and `ddplab launch`'s (declared_at, no reason).
        Both read back as this one."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "declared_at" not in data and "detected_at" in data:
            stalled = data.get("no_progress_s") or 0
            data["declared_at"] = data["detected_at"]
            data.setdefault("last_progress_at", data["detected_at"] - stalled)
            data.setdefault("hang_timeout_s", stalled)
            data.setdefault("waiting_ranks", [])
            data.setdefault("killed", data.get("killed_after_grace") or [])
        data.setdefault("reason", f"no progress for {data.get('no_progress_s')} s while a rank waited")
        return data


@dataclass(frozen=True)
class LeftProcess:
    """A process the job started that was still running after it ended (ddplab ended it, or could not)."""

    pid: int
    cmdline: str
    ended: bool = False  # ddplab ended it after the job (its descendant, or carrying its run id)


@dataclass(frozen=True)
class MachineLoss:
    """Machines of a job across machines that went silent while it failed (supervision/states.silent_machines):
    killed, or cut off before their ranks could say anything. Judged from the job's store by this machine's
    supervisor; this machine's own ranks are never among them."""

    machines: dict[str, list[int]]  # machine -> its global ranks
    reason: str
    last_heard: dict[str, float] = field(default_factory=dict)  # machine -> when its ranks were last heard (wall)

    @property
    def ranks(self) -> list[int]:
        return sorted(r for ranks in self.machines.values() for r in ranks)
