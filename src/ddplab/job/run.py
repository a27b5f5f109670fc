"""`ddplab launch` as a library: one supervised job, from its LaunchConfig to its report.

Refuses bad input (UsageError, EnvironmentUnsupported) before anything starts; then creates the job directory,
runs the job through torch's elastic launcher with the watcher beside it, names the culprits when it did not
succeed, and writes <job dir>/report.json (atomically) before returning the report.
"""

from __future__ import annotations

from typing import Callable

from ..config import LaunchConfig
from ..records import Report
from . import flight
from .layout import JobDir, write_json_atomically
from .outcome import build_report
from .supervise import expected_ranks, gather_evidence, run_job
from .torchrun_args import resolve


def run(config: LaunchConfig, say: Callable[[str], None] = lambda text: None) -> Report:
    """The job's report. ``say`` hears where the job directory is, before the job starts."""
    request = resolve(config)
    job = JobDir.create(request.out)
    say(f"ddplab launch: job directory {job.path}")
    outcome = run_job(request, job)
    evidence = gather_evidence(request, outcome)
    culprit = None
    if not outcome.ok:
        culprit = flight.name_culprits(evidence, expected_ranks(request),
                                       now=outcome.hang.declared_at if outcome.hang else None).to_record()
    report = build_report(request, outcome, evidence, culprit)
    write_json_atomically(job.report_file, report.to_json())
    return report
