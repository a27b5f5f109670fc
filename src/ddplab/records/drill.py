"""The fault drills' records: what the ranks of a drill run and return, what each drill found, and the drills
as reported. A ``DrillOutcome`` carries what every drill measures and, in ``details``, the few numbers only one drill
has; read back ``details`` is an open object, since only the terminal reads those numbers, and it shows them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .codec import FLATTEN, OMIT, SKIP
from .core import Verdict
from .figures import Timeline, TimelineRow
from .session import Distribution, SessionRecord
from .stragglers import StragglerReport


# ---------------------------------------------------------------------------------------- one drill

@dataclass(frozen=True)
class Injection:
    """The fault and when it really went in (``at`` None: it never did, and the drill fails)."""

    what: str | None
    rank: int | str  # the victim's global rank, or "launcher"
    at: float | None

    @property
    def went_in(self) -> bool:
        return self.at is not None


@dataclass(frozen=True)
class DrillOutcome:
    """One drill: the fault, how the stack reacted, what was left, and the verdict of the drill's own rule."""

    drill: str
    verdict: Verdict = Verdict.FAIL  # a drill nobody judged fails
    expect: str = ""  # the pass condition, in words
    failed_because: list[str] | None = field(default=None, metadata=OMIT)  # each part of it this run missed
    injected: Injection | None = None
    detected_by: str | None = None  # the mechanism that saw the fault first
    detect_s: float | None = None  # from the injection to that detection
    error_excerpt: str = ""
    culprit_ranks: list[int] = field(default_factory=list)  # whom ddplab names
    culprit_reason: str = ""
    # a job across machines: each culprit's machine (rank -> machine, its address toward the endpoint)
    culprit_hosts: dict[int, str | None] | None = field(default=None, metadata=OMIT)
    torchrun_root_cause_rank: int | None = None  # whom torchrun would name (the first rank to fail)
    leaked_pids: list[int] = field(default_factory=list)  # processes of the drill alive after it ended
    device_mem_before_bytes: int | None = None  # None: the platform has no device-wide memory reading
    device_mem_after_bytes: int | None = None
    memory_back_s: float | None = None  # None: memory never came back (or was not measured)
    interrupted: bool = False
    session: SessionRecord | None = field(default=None, metadata=OMIT)  # the ranks' run, for in-process drills
    latencies: dict[int, list[float] | None] | None = field(default=None, metadata=OMIT)  # global rank -> latencies
    run_dir: str | None = field(default=None, metadata=OMIT)  # drills that start a launcher of their own
    run_id: str | None = field(default=None, metadata=OMIT)
    error: str | None = field(default=None, metadata=OMIT)  # the drill itself crashed
    details: Any = field(default=None, metadata=FLATTEN)  # one drill's own numbers (the classes below)

    @property
    def fault_went_in(self) -> bool:
        return self.injected is not None and self.injected.went_in

    def culprits_in_words(self) -> str:
        """[3] on 10.9.0.2 (the machines where known), or [3]."""
        machines = sorted({h for h in (self.culprit_hosts or {}).values() if h})
        return f"{self.culprit_ranks}" + (f" on {', '.join(machines)}" if machines else "")

    def run_ids(self) -> set[str]:
        """The runs this drill started: its ranks' session, and the launcher it started itself."""
        return {rid for rid in (self.session.run_id if self.session else None, self.run_id) if rid}


# ---------------------------------------------------------------------------------------- one drill's own numbers

@dataclass(frozen=True)
class StallHandling:
    """One of the stall drill's two runs: how the stall was seen."""

    detected_by: str | None
    detect_s: float | None
    culprit_ranks: list[int]
    error_excerpt: str


@dataclass(frozen=True)
class BlockingWaitHandling(StallHandling):
    leaked_pids: list[int] = field(default_factory=list)
    blocking_wait_env: str = ""  # the variable that turned blocking wait on, or why none was needed


@dataclass(frozen=True)
class StallDetails:
    default_handling: StallHandling
    blocking_wait: BlockingWaitHandling


@dataclass(frozen=True)
class LatencyComparison:
    """What the ranks other than the victim measured, without and with the victim's pauses."""

    baseline: Distribution
    paused: Distribution


@dataclass(frozen=True)
class Inflation:
    """paused / baseline of each percentile; None where the baseline has none."""

    p50: float | None
    p99: float | None
    max: float | None


@dataclass(frozen=True)
class StragglerDetails:
    pause_ms_per_s: int
    others_latency_us: LatencyComparison
    inflation: Inflation
    # What ddplab's straggler watch (the one `ddplab launch` runs) found in each run; None in reports before it.
    stragglers_named: list[int] | None = field(default=None, metadata=OMIT)  # in the run with the pauses
    baseline_named: list[int] | None = field(default=None, metadata=OMIT)  # in the run without
    stragglers: StragglerReport | None = field(default=None, metadata=OMIT)  # the paused run's, with its evidence


@dataclass(frozen=True)
class DesyncDetails:
    operations: dict[int, str]  # global rank -> the collective it was in when the hang was declared


@dataclass(frozen=True)
class OomDetails:
    victim_error: str
    victim_error_names_cap: bool


@dataclass(frozen=True)
class ChildLauncherDetails:
    """interrupt / kill_launcher: a separate `ddplab train` signalled mid-run."""

    launcher_exit_code: int | None  # None: it had to be ended
    report_written: bool
    rank_pids: list[int]


@dataclass(frozen=True)
class NodeDetails:
    """kill_node / partition on one machine of the job: the victim's machine, or a survivor watching it go."""

    role: str  # "victim" (the fault went into this machine's launcher and ranks) or "survivor"
    machine: str | None  # the victim's machine as the job's store named it (a survivor's view)
    machine_ranks: list[int]  # the victim's: its own ranks; a survivor's: the victim machine's ranks
    launcher_exit_code: int | None  # this machine's launcher (None: it had to be ended, or was killed)
    report_written: bool


@dataclass(frozen=True)
class TorchrunDetails:
    """kill_launcher --launcher torchrun: plain torchrun's orphans, then `ddplab clean --yes`."""

    launcher: str
    worker_pids: list[int]
    orphans_after_kill: list[int]
    clean_exit_code: int | None
    clean_output: str
    cleaned: bool


# ---------------------------------------------------------------------------------------- the drills as reported

@dataclass(frozen=True)
class DrillRecord:
    """`ddplab drill`: the placement the drills ran with, and each drill's outcome in the order run. No
    ``timed_rows``: a drill's times are detection times, not performance to line up with another report."""

    backend: str
    backend_reason: str
    shared_device: bool
    drills: list[DrillOutcome]
    interrupted: bool = False  # a stop signal ended the drills early (reports before it: never)
    # The machine the drills ran on: written at the report's top level, not inside results.
    platform: Any = field(default=None, metadata=SKIP, compare=False)

    def run_ids(self) -> set[str]:
        """Every run the drills started (the lab checks that none of them left a process behind)."""
        return {rid for outcome in self.drills for rid in outcome.run_ids()}

    def figures(self, stage: str) -> list[Timeline]:
        """Each drill from injection to its first detection, with what was left behind and its verdict."""
        if not self.drills:
            return []
        rows = [TimelineRow(d.drill, (d.injected.what if d.injected else None) or "(nothing injected)", d.detected_by,
                            d.detect_s, f"{len(d.leaked_pids)} leaked" if d.leaked_pids else "clean", str(d.verdict))
                for d in self.drills]
        return [Timeline("drill-timeline", "Drill timeline", "red: fault injected; blue: first detection (mechanism "
                         "in the tooltip); right: seconds to detection, processes left, verdict", rows)]
