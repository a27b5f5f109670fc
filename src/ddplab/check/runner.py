"""The check as a library: run it (or judge a report already written), and write its report.

env first, as in the lab; where the environment cannot even be read nothing else runs and the node is UNKNOWN.
Then the check's stages through the lab's own stage runner (each stage isolated, the leftover check after them),
then the judgement. The check's --deadline is a stop request like Ctrl+C's, so it ends the running stage's ranks
the same way and the leftover check still runs after it. <out>/report.json and report.html hold everything.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import time

import psutil

from ..basics import interrupts
from ..lab import run as lab
from .. import measurements
from ..lab.profiles import Machine, Stage
from ..records import Report
from . import COMMAND, plan
from .config import CheckConfig
from .record import CheckRecord
from .inject import apply_row_faults, leftover, wants_leftover
from .judge import Expectations, Stop, judge


def run(config: CheckConfig, console, expectations: Expectations) -> Report:
    if config.from_report:
        return judge_report(config, expectations)
    out = lab.claim_out_dir(config.out, COMMAND)
    started = time.monotonic()
    planted = leftover(f"check-injected-{out.name}", out / "injected-leftover") \
        if wants_leftover(config.inject) else contextlib.nullcontext()
    with planted as described:
        records = []
        with interrupts.deadline(seconds_left(config.deadline_s)):
            env_stage = Stage("env", "env", measurements.get("env").Config(device=config.device))
            env_report = lab.run_stage(records, env_stage, console)
            platform = env_report.platform if env_report else None
            stages = [] if env_report is None else plan.stages(Machine.of(platform, config.device), config.nproc,
                                                                 out, config.stage_deadline_s, config.across())
            ran = lab.run_stages(config, stages, out, console, platform, records, started, first=[env_stage],
                                 write=False)
        injected = _injected(config, described)
        stop = None
        if ran.results.interrupted:
            done = {s.name for s in ran.results.stages}
            stop = Stop(interrupts.requested() or "a stop signal", tuple(s.name for s in stages if s.name not in done))
        record = judge(apply_row_faults(ran.results.stages, config.inject), platform, expectations, stop=stop,
                       duration_s=round(time.monotonic() - started, 1), out=str(out.resolve()), injected=injected,
                       deadline_s=config.deadline_s)
    report = Report(command=COMMAND, config=ran.config, platform=platform, results=record,
                    verdict=record.status.verdict)
    lab.write_reports(report, out)
    return report


def seconds_left(deadline_s: float) -> float:
    """The deadline counts from ddplab's start, as the runner that started it counts (Slurm's 60 s): what is left
    of it now, after the interpreter, torch's import and the command line took their share."""
    try:
        since_start = time.time() - psutil.Process(os.getpid()).create_time()
    except psutil.Error:
        since_start = 0.0
    return deadline_s - max(since_start, 0.0)


def judge_report(config: CheckConfig, expectations: Expectations) -> Report:
    """Judge the stages of a report already written (a check's or a lab run's): nothing runs. The judgement keeps
    the report's time (the textfile's last-run timestamp): an old report must look old to a staleness alert."""
    from ..errors import UsageError
    from ..reading.catalog import read_report

    source = read_report(config.from_report)
    if source.command not in ("check", "run"):
        raise UsageError("invalid-report", f"--from-report {config.from_report} is a ddplab {source.command} "
                                           "report; give the report of `ddplab check` or `ddplab run`")
    r = source.results
    is_check = isinstance(r, CheckRecord)
    earlier = list(r.injected) if is_check else []  # a check's report keeps its faults: still said
    stop = None
    if r.interrupted:
        planned = [p.name for p in getattr(source.config, "stages", None) or []]
        done = {s.name for s in r.stages}
        stop = Stop((r.stopped_by if is_check else None) or "a stop signal",
                    tuple(r.not_run) if is_check else tuple(n for n in planned if n not in done))
    record = judge(apply_row_faults(r.stages, config.inject), source.platform, expectations, stop=stop,
                   duration_s=r.duration_s, out=r.out, from_report=config.from_report,
                   injected=earlier + _injected(config, None), finished_unix=report_time(source, config.from_report),
                   deadline_s=r.deadline_s if is_check else None)
    return Report(command=COMMAND, config=config, platform=source.platform, results=record,
                  verdict=record.status.verdict)


def report_time(report: Report, path: str) -> float:
    """When the report's run ended: a check's own time, else when its report was made, else the file's time."""
    if isinstance(report.results, CheckRecord):
        return report.results.finished_unix
    try:
        return datetime.datetime.fromisoformat(report.created_utc).timestamp()
    except ValueError:
        return os.path.getmtime(path)


def _injected(config: CheckConfig, leftover: str | None) -> list[str]:
    """The faults as the report says them: the leftover process planted, by its pid and run."""
    return [leftover if spec == "leftover" and leftover is not None else spec for spec in config.inject]
