"""The report of one supervised job, built in one function (``build_report``) so that it can
move onto the typed records of the redesign (issue 11) in one step. Same JSON contract as
every ddplab command (report.document): command "launch".
"""

from __future__ import annotations

import platform
import socket
import sys

from .. import report
from .flight import RankEvidence, Verdict
from .supervise import JobOutcome
from .torchrun_args import LaunchRequest


def build_report(request: LaunchRequest, outcome: JobOutcome, evidence: dict[int, RankEvidence],
                 verdict: Verdict | None) -> dict:
    job = outcome.job
    ranks = [_rank_entry(job, ev, outcome) for ev in evidence.values()]
    results = {
        "outcome": outcome_word(outcome),
        "job_dir": str(job.path),
        "run_id": job.run_id,
        "duration_s": round(outcome.ended_at - outcome.started_at, 3),
        "detected_at": outcome.detected_at,
        "detected_by": _detected_by(outcome),
        "hang": outcome.hang,
        "culprit": verdict.to_dict() if verdict else None,
        "torchrun_root_cause_rank": outcome.torchrun_root_cause_rank,
        "ranks": ranks,
        "stacks": {str(e["rank"]): e["stacks"] for e in ranks if e["stacks"]},
        "flight_records": {str(e["rank"]): e["flight_record"] for e in ranks if e["flight_record"]},
        "left_running": outcome.left_running,
        "nothing_left_running": not outcome.left_running,
        "launcher_error": outcome.launcher_error,
    }
    config = {
        "target": {"kind": request.target.kind, "name": request.target.name, "args": list(request.target.args)},
        "hang_timeout_s": request.hang_timeout_s,
        "out": request.out,
        "worker_env": request.worker_env,
        "torchrun": request.torchrun,
    }
    host = {"host": socket.gethostname(), "python": platform.python_version(), "torch": _torch_version()}
    verdict_word = "pass" if outcome.ok and not outcome.left_running else "fail"
    return report.document("launch", config, host, results, verdict_word)


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


def _rank_entry(job, ev: RankEvidence, outcome: JobOutcome) -> dict:
    status = ev.status or {}
    failure = outcome.failures.get(ev.rank) or {}
    fatal = job.fatal_file(ev.rank)
    return {
        "rank": ev.rank,
        "local_rank": status.get("local_rank", failure.get("local_rank")),
        "pid": status.get("pid", failure.get("pid")),
        "host": status.get("host"),
        "ended_by": ev.ended_by,
        "stopped_by_launcher": ev.stopped_by_launcher,
        "exit_code": failure.get("exitcode", 0 if ev.ended_by == "exit 0" else None),
        "error": ev.error,
        "last_status": {k: status.get(k) for k in ("phase", "where", "progress", "heartbeat", "in_process_group",
                                                  "flight_recorder", "recorder")} if status else None,
        "answered_dump_request": ev.answered,
        "stacks": _existing(job.stacks_file(ev.rank)),
        "fatal_stacks": str(fatal) if fatal.exists() and fatal.stat().st_size else None,
        "flight_record": _existing(job.flight_file(ev.rank)),
    }


def _existing(path) -> str | None:
    return str(path) if path.exists() else None


def _torch_version() -> str | None:
    module = sys.modules.get("torch")
    return getattr(module, "__version__", None)
