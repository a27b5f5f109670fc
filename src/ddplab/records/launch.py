"""`ddplab launch`: one supervised job of the user's own, as reported in <job dir>/report.json: how it ended and
who noticed, each rank's exit and error, the culprit and its evidence, the stacks and flight records, each rank's
memory and CPU time, and what was still running afterwards. The command line is the report's config.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from .codec import OMIT, OMIT_DEFAULT, SKIP
from .core import Check, Verdict
from .figures import Figure, Table
from .session import Listened, Timeseries
from .stragglers import StragglerReport
from .supervision import (CollectiveCall, Culprit, GroupProgress, Hang, LeftProcess, RankError, RankState, RasAnswer,
                          Where)

__all__ = ["Hang", "JobHost", "JobRank", "LastStatus", "LaunchRecord", "LeftProcess", "RasAnswer", "last_status"]

SUCCEEDED = "succeeded"


@dataclass(frozen=True)
class JobHost:
    """The launcher's machine (the report's "platform" for a job: ddplab probes no device for it)."""

    host: str
    python: str
    torch: str | None

    def machine_line(self) -> str:
        return f"{self.host}: python {self.python}, torch {self.torch or 'unknown'}"


@dataclass(frozen=True)
class LastStatus:
    """A rank's last heartbeat, as the report keeps it; every key is written, null where the rank never said."""

    phase: str | None = None  # running | in-init | in-collective | finished | failed | exec
    where: Where | None = None
    progress: dict[str, GroupProgress] | None = None  # process group id -> counters
    heartbeat: float | None = None
    in_process_group: bool | None = None
    flight_recorder: str | None = None  # who set the recorder up, in words
    recorder: str | None = None  # the torch call that reads the recorder


def last_status(state: RankState, phase: str | None = None) -> LastStatus:
    """What the report keeps of a rank's last status (``phase``: as the judge read it)."""
    return LastStatus(phase or state.phase, state.where, state.progress, state.heartbeat, state.in_process_group,
                      state.flight_recorder, state.recorder)


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
    # file: its stacks as py-spy read them from outside, when it did not answer a hang's dump request
    py_spy_stacks: str | None = field(default=None, metadata=OMIT)


@dataclass(frozen=True)
class LaunchRecord:
    platform_type: ClassVar[type] = JobHost  # what the report's "platform" holds (records.Report.from_json)

    outcome: str  # succeeded | failed | hung | interrupted | launcher-error
    job_dir: str
    run_id: str
    duration_s: float
    detected_at: float | None  # when ddplab knew the job had gone wrong
    detected_by: str | None
    hang: Hang | None
    culprit: Culprit | None
    torchrun_root_cause_rank: int | None  # the rank torchrun would blame (the first to fail)
    ranks: list[JobRank]
    left_running: list[LeftProcess]
    launcher_error: str | None
    # Each rank's memory and CPU time while it ran (the launcher's sampler); None in reports before it.
    timeseries: Timeseries | None = field(default=None, metadata=OMIT)
    # Where the job's rendezvous store and the ranks' collective sockets listened; None in reports before it.
    listen: Listened | None = field(default=None, metadata=OMIT)
    # What the ranks left running when the job ended, which ddplab then ended: the whole process tree ends with it.
    ended_after: list[LeftProcess] = field(default_factory=list, metadata=OMIT_DEFAULT)
    # Which rank made the others wait while the job ran, from the ranks' flight recorders; None in reports before it.
    stragglers: StragglerReport | None = field(default=None, metadata=OMIT)
    # Derived from the ranks and left_running, written for readers of the JSON.
    stacks: dict[int, str] = field(init=False, default_factory=dict)
    flight_records: dict[int, str] = field(init=False, default_factory=dict)
    nothing_left_running: bool = field(init=False, default=True)
    platform: JobHost | None = field(default=None, metadata=SKIP, compare=False)
    # The request as it ran (job/config.UserJobConfig with the rendezvous ddplab chose): the report's config.
    ran_with: Any = field(default=None, metadata=SKIP, compare=False)

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
                  f"{left} process(es)" + "".join(f"; {p.pid} {p.cmdline[:60]}" for p in self.left_running[:3])
                  + (f"; ddplab ended {len(self.ended_after)} the job's ranks had left running: "
                     + ", ".join(f"{p.pid} {p.cmdline[:40]}" for p in self.ended_after[:3])
                     if self.ended_after else ""),
                  "0 processes", "every process the job started is gone",
                  "none" if not left else "`ddplab clean` lists them once their launcher is gone"),
        ]

    def summary(self) -> str:
        text = f"{self.outcome.upper()} in {self.duration_s:.1f} s"
        return f"{text}: {self.culprit.reason}" if self.culprit else text

    def run_ids(self) -> list[str]:
        return [self.run_id]

    def figures(self, stage: str) -> list[Figure]:
        """report.html: the ranks, the culprit and its evidence, each rank's memory and CPU time."""
        charts = [*self.timeseries.memory_chart(stage), *self.timeseries.cpu_chart(stage)] if self.timeseries else []
        listen = [self.listen_table(stage)] if self.listen else []
        stragglers = self.stragglers.figures(stage) if self.stragglers else []
        return [self.rank_table(stage), self.culprit_table(stage), *stragglers, *listen, *charts]

    def rank_table(self, stage: str) -> Table:
        return Table("launch-ranks", "Ranks", f"{stage}: every rank, how it ended, and its evidence files "
                                              f"(in {self.job_dir})",
                     ["rank", "host", "exit", "ended by", "error", "stacks", "flight record"],
                     [_rank_row(r) for r in sorted(self.ranks, key=lambda r: r.rank)])

    def listen_table(self, stage: str) -> Table:
        listen = self.listen
        rows = [["listened", listen.summary], ["rendezvous store", listen.store]]
        rows += [[p.variable, f"{p.value} (set by {p.set_by})"] for p in listen.sockets]
        rows += [["why not loopback only", why] for why in listen.why_not]
        return Table("launch-listen", "Where the job listened", f"{stage}: the rendezvous store and the "
                                                                "collectives' sockets (loopback only on one machine)",
                     ["what", "where"], rows)

    def culprit_table(self, stage: str) -> Table:
        """Who held the job up and why, each row in words: what is not known is left out, never written "None"."""
        rows = [["outcome", self.summary()], ["detected by", self.detected_by or "nothing (the job ended by itself)"]]
        if self.culprit:
            rows += _culprit_rows(self.culprit)
        if self.torchrun_root_cause_rank is not None:
            rows.append(["torchrun would blame", f"rank {self.torchrun_root_cause_rank} (the first rank to fail)"])
        if self.hang:
            rows += _hang_rows(self.hang)
        if self.launcher_error:
            rows.append(["launcher error", self.launcher_error])
        return Table("launch-culprit", "Culprit and evidence", f"{stage}: who held the job up, and why ddplab "
                                                               "thinks so", ["what", "found"], rows)


def _rank_row(r: JobRank) -> list[str]:
    error = f"{r.error.type}: {r.error.message}" if r.error else ""
    exit_code = "" if r.exit_code is None else str(r.exit_code)
    ended = (r.ended_by or "unknown") + (" (stopped by the launcher)" if r.stopped_by_launcher else "")
    stacks = "\n".join(f for f in (r.stacks, r.fatal_stacks, r.py_spy_stacks) if f)
    return [str(r.rank), r.host or "", exit_code, ended, error, stacks, r.flight_record or ""]


def collective_words(k: CollectiveCall) -> str:
    """all_reduce #4 in group 0, input sizes [[1024]], dtypes Float: the parts the flight records gave."""
    text = (k.op or "a collective") + (f" #{k.seq}" if k.seq is not None else "") + \
        (f" in group {k.pg}" if k.pg is not None else "")
    if k.input_sizes is not None:
        text += f", input sizes {k.input_sizes}"
    if k.dtypes:
        text += ", dtypes " + (", ".join(str(d) for d in k.dtypes) if isinstance(k.dtypes, list) else str(k.dtypes))
    return text


def _culprit_rows(c: Culprit) -> list[list[str]]:
    rows = [["culprit ranks", (", ".join(str(r) for r in c.ranks) or "none") + f" ({c.kind})"], ["reason", c.reason]]
    if c.collective and (c.collective.op or c.collective.seq is not None):
        rows.append(["collective", collective_words(c.collective)])
    analyzer = "; ".join(t for t in (f"{c.analyzer.tool}: {c.analyzer.status}", c.analyzer.why, c.analyzer.error) if t)
    return rows + [["evidence", "\n".join(c.evidence)], ["torch's analyzer", analyzer]]


def _seconds(s: float | None) -> str:
    return "unknown" if s is None else f"{s:g} s"


def _hang_rows(h: Hang) -> list[list[str]]:
    def ranks(found: list[int]) -> str:
        return ", ".join(str(r) for r in found) or "none"

    rows = [["hang", f"no progress for {_seconds(h.no_progress_s)} (hang timeout {_seconds(h.hang_timeout_s)}); "
                     f"ranks waiting: {ranks(h.waiting_ranks)}; answered the dump request: {ranks(h.answered)}; "
                     f"stacks by signal: {ranks(h.signalled_for_stacks)}; terminated: {ranks(h.terminated)}; "
                     f"killed after the grace period: {ranks(h.killed)}"]]
    if h.py_spy:
        rows.append(["stacks of the ranks that did not answer", h.py_spy])
    if h.ras:
        ras = h.ras
        said = (f"{ras.service}: " if ras.service else "") + ras.status + (f" ({ras.why})" if ras.why else "")
        rows.append(["RAS", said + (f" at {ras.address}" if ras.address else "")
                     + (f" in {_seconds(ras.seconds)}" if ras.seconds is not None else "")])
        if ras.answer:
            rows.append([f"RAS answer ({ras.format})" if ras.format else "RAS answer", ras.answer])
    return rows
