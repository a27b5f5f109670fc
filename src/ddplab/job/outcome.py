"""The report of one supervised job: a LaunchRecord (records/launch.py) built from what elastic, the watcher and
each rank left behind, in the envelope every ddplab command writes (records.Report, command "launch")."""

from __future__ import annotations

import platform
import socket
import sys

from ..records import RecordError, Report, Verdict
from ..records.codec import from_json
from ..records.launch import Culprit, JobHost, JobRank, LaunchRecord, RankError, RankStatus
from .flight import RankEvidence
from .supervise import JobOutcome
from .torchrun_args import LaunchRequest

COMMAND = "launch"


def build_report(request: LaunchRequest, outcome: JobOutcome, evidence: dict[int, RankEvidence],
                 culprit: Culprit | None) -> Report:
    record = build_record(outcome, evidence, culprit)
    return Report(command=COMMAND, config=request.launch_config(), platform=record.platform, results=record,
                  verdict=Verdict.worst(c.verdict for c in record.checks()))


def build_record(outcome: JobOutcome, evidence: dict[int, RankEvidence], culprit: Culprit | None) -> LaunchRecord:
    job = outcome.job
    return LaunchRecord(
        outcome=outcome_word(outcome),
        job_dir=str(job.path),
        run_id=job.run_id,
        duration_s=round(outcome.ended_at - outcome.started_at, 3),
        detected_at=outcome.detected_at,
        detected_by=_detected_by(outcome),
        hang=outcome.hang,
        culprit=culprit,
        torchrun_root_cause_rank=outcome.torchrun_root_cause_rank,
        ranks=[_rank(job, ev, outcome) for ev in evidence.values()],
        left_running=list(outcome.left_running),
        launcher_error=outcome.launcher_error,
        timeseries=outcome.timeseries,
        listen=outcome.listen,
        platform=JobHost(host=socket.gethostname(), python=platform.python_version(), torch=_torch_version()),
    )


def outcome_word(outcome: JobOutcome) -> str:
    if outcome.ok:
        return "succeeded"
    if outcome.hang:
        return "hung"
    if outcome.interrupted:
        return "interrupted"
    if outcome.launcher_error:
        return "launcher-error"
    return "failed"


def _detected_by(outcome: JobOutcome) -> str | None:
    if outcome.ok:
        return None
    if outcome.hang:
        return "ddplab's watcher (no progress while a rank waited)"
    if outcome.first_failure_seen_at is not None and outcome.first_failure_seen_at <= outcome.ended_at:
        return "a rank's error record"
    return "torch's elastic launcher (a rank exited)"


def _rank(job, ev: RankEvidence, outcome: JobOutcome) -> JobRank:
    status = _read(RankStatus, ev.status, f"{job.status_file(ev.rank)}")
    failure = outcome.failures.get(ev.rank)
    fatal = job.fatal_file(ev.rank)
    return JobRank(
        rank=ev.rank,
        local_rank=status.local_rank if status and status.local_rank is not None else
        (failure.local_rank if failure else None),
        pid=status.pid if status and status.pid is not None else (failure.pid if failure else None),
        host=status.host if status else None,
        ended_by=ev.ended_by,
        stopped_by_launcher=ev.stopped_by_launcher,
        exit_code=failure.exitcode if failure else (0 if ev.ended_by == "exit 0" else None),
        error=_read(RankError, ev.error, f"{job.error_file(ev.rank)}"),
        last_status=status.last_status() if status else None,
        answered_dump_request=ev.answered,
        stacks=_existing(job.stacks_file(ev.rank)),
        fatal_stacks=str(fatal) if fatal.exists() and fatal.stat().st_size else None,
        flight_record=_existing(job.flight_file(ev.rank)),
    )


def _read(cls, data: dict | None, where: str):
    """A rank's own file as its record; a damaged one is left out rather than lose the job's report."""
    if data is None:
        return None
    try:
        return from_json(cls, data, where)
    except RecordError:
        return None


def _existing(path) -> str | None:
    return str(path) if path.exists() else None


def _torch_version() -> str | None:
    module = sys.modules.get("torch")
    return getattr(module, "__version__", None)
