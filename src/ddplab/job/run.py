"""`ddplab launch` as a library: one supervised job, from its UserJobConfig to its report.

Refuses bad input (UsageError, EnvironmentUnsupported) before anything starts: torchrun's options, the RAS
address when --ras asks for it, a job directory that already holds a run. Then runs the job through torch's
elastic launcher with the watcher and the sampler beside it (supervision/job.py, as every lab stage and
drill), names the culprits when it did not succeed, and
writes <job dir>/report.json and report.html (each atomically) before returning the report.
"""

from __future__ import annotations

import json
import os
from typing import Callable

from ..files import write_text_atomic
from ..platform import Platform, detect, open_monitor
from ..records import Report
from ..rundir import RunDir
from . import ras
from .config import UserJobConfig
from .outcome import build_report
from .supervise import run_user_job
from .torchrun_args import resolve

LABEL = "launch"  # run ids read launch-<date>-<time>-<hex>, as the default directory's name does
OUT_OPTION = "--out"


def run(config: UserJobConfig, say: Callable[[str], None] = lambda text: None,
        platform: Platform | None = None) -> Report:
    """The job's report. ``say`` hears where the job directory is, before the job starts. ``platform``: this
    machine as platform.detect() describes it (detected when not given): its device monitor samples the
    ranks, and its collective library's RAS service is the one --ras asks."""
    from ..html_report import write_page

    request = resolve(config)
    machine = platform or detect(with_memory=False)
    ras_plan = ras.plan(request.ras, machine.spec.ras, machine.collective_library, _library_version(machine),
                        {**os.environ, **request.worker_env})  # what the ranks will see
    job = RunDir.create(request.out, LABEL, option=OUT_OPTION)
    say(f"ddplab launch: job directory {job.path}")
    monitor = open_monitor(machine.spec)
    try:
        outcome, sampler = run_user_job(request, job, monitor, ras_plan, device_type=machine.device_type)
    finally:
        monitor.close()
    report = build_report(request, outcome, sampler.timeseries())
    write_text_atomic(job.report_file, json.dumps(report.to_json(), default=str))
    write_page(report, job.page_file)  # and the hang's timeline as a trace-event file beside it
    return report


def _library_version(machine: Platform) -> str | None:
    """The collective library the ranks will load: the copy torch's calls bind to, else the one it was built
    against."""
    return machine.collective_loaded_version or machine.collective_built_version
