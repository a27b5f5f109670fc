"""The LaunchRecord of one supervised job of the user's, built from the job's outcome."""

from __future__ import annotations

import platform
import socket
import sys

from ..records.launch import JobHost, JobRank, LaunchRecord, last_status
from ..records.session import Timeseries
from ..supervision.evidence import RankEvidence
from ..supervision.job import JobOutcome


def build_record(outcome: JobOutcome, timeseries: Timeseries | None, ran_with=None) -> LaunchRecord:
    """``ran_with``: the request as the report shows it (torchrun_args.LaunchRequest.launch_config)."""
    run = outcome.run
    word, detected_by = _outcome(outcome)
    return LaunchRecord(
        outcome=word,
        job_dir=str(run.path),
        run_id=run.run_id,
        duration_s=round(outcome.ended_at - outcome.started_at, 3),
        detected_at=outcome.detected_at,
        detected_by=detected_by,
        hang=outcome.hang,
        culprit=outcome.culprit,
        torchrun_root_cause_rank=outcome.torchrun_root_cause_rank,
        ranks=[_rank(run, ev, outcome) for ev in outcome.evidence.values()],
        left_running=list(outcome.left_running),
        launcher_error=outcome.launcher_error,
        timeseries=timeseries,
        listen=outcome.listen,
        ended_after=list(outcome.ended_after),
        platform=JobHost(host=socket.gethostname(), python=platform.python_version(),
                         torch=getattr(sys.modules.get("torch"), "__version__", None)),
        ran_with=ran_with,
        stragglers=outcome.stragglers,
    )


def _outcome(outcome: JobOutcome) -> tuple[str, str | None]:
    """The job's outcome in a word, and what detected it."""
    if outcome.ok:
        return "succeeded", None
    if outcome.hang:
        return "hung", "ddplab's watcher (no progress while a rank waited)"
    if outcome.interrupted:
        return "interrupted", "a stop signal to the launcher"
    if outcome.first_failure_seen_at is not None and outcome.first_failure_seen_at <= outcome.ended_at:
        detected_by = "ddplab's watcher (a rank failed)"
    else:
        detected_by = "torch's elastic launcher (a rank exited)"
    return ("launcher-error" if outcome.launcher_error else "failed"), detected_by


def _rank(run, ev: RankEvidence, outcome: JobOutcome) -> JobRank:
    status = ev.status
    failure = outcome.failures.get(ev.rank)
    end = ev.end
    fatal = run.fatal_file(ev.rank)
    if end is not None:
        ended_by, exit_code = end.in_words(), end.exit_code
    elif status is not None and status.phase == "finished":
        ended_by, exit_code = "exit 0", 0
    else:
        ended_by, exit_code = (failure.ended_by, failure.exitcode) if failure else (None, None)
    return JobRank(
        rank=ev.rank,
        local_rank=status.local_rank if status and status.local_rank is not None else
        (failure.local_rank if failure else None),
        pid=status.pid if status else (end.pid if end else (failure.pid if failure else None)),
        host=status.host if status else None,
        ended_by=ended_by,
        stopped_by_launcher=ev.stopped_by_launcher,
        exit_code=exit_code,
        error=ev.error,
        last_status=last_status(status, ev.phase) if status else None,
        answered_dump_request=ev.answered,
        stacks=_existing(run.stack_file(ev.rank)),
        fatal_stacks=str(fatal) if fatal.exists() and fatal.stat().st_size else None,
        flight_record=_existing(run.flight_file(ev.rank)),
        py_spy_stacks=_existing(run.py_spy_file(ev.rank)),
    )


def _existing(path) -> str | None:
    return str(path) if path.exists() else None
