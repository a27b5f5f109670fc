"""`ddplab launch` as a library: one supervised job, from its LaunchConfig to its report.

Refuses bad input (UsageError, EnvironmentUnsupported) before anything starts: torchrun's options, the RAS
address when --ras asks for it, a job directory that already holds a run. Then runs the job through torch's
elastic launcher with the watcher and the sampler beside it, names the culprits when it did not succeed, and
writes <job dir>/report.json and report.html (each atomically) before returning the report.
"""

from __future__ import annotations

import os
from typing import Callable

from ..config import LaunchConfig
from ..files import write_text_atomic
from ..platform import Platform, detect, open_monitor
from ..records import Report
from . import flight, ras
from .layout import JobDir, write_json_atomically
from .outcome import build_report
from .supervise import expected_ranks, gather_evidence, run_job
from .torchrun_args import resolve


def run(config: LaunchConfig, say: Callable[[str], None] = lambda text: None,
        platform: Platform | None = None) -> Report:
    """The job's report. ``say`` hears where the job directory is, before the job starts. ``platform``: this
    machine as platform.detect() describes it (detected when not given): its device monitor samples the
    ranks, and its collective library's RAS service is the one --ras asks."""
    from ..html_report import render_html

    request = resolve(config)
    machine = platform or detect(with_memory=False)
    ras_plan = ras.plan(request.ras, machine.spec.ras, machine.collective_library, _library_version(machine),
                        {**os.environ, **request.worker_env})  # what the ranks will see
    job = JobDir.create(request.out)
    say(f"ddplab launch: job directory {job.path}")
    monitor = open_monitor(machine.spec)
    try:
        outcome = run_job(request, job, monitor, ras_plan, device_type=machine.device_type)
    finally:
        monitor.close()
    evidence = gather_evidence(request, outcome)
    culprit = None
    if not outcome.ok:
        culprit = flight.name_culprits(evidence, expected_ranks(request),
                                       now=outcome.hang.declared_at if outcome.hang else None).to_record()
    report = build_report(request, outcome, evidence, culprit)
    write_json_atomically(job.report_file, report.to_json())
    write_text_atomic(job.page_file, render_html(report))
    return report


def _library_version(machine: Platform) -> str | None:
    """The collective library the ranks will load: the copy torch's calls bind to, else the one it was built
    against."""
    return machine.collective_loaded_version or machine.collective_built_version
