"""`ddplab launch` as a library, in the measurement shape: one supervised job, from its UserJobConfig to its
LaunchRecord. Bad input (torchrun's options, the RAS address, a job directory that holds a run) is refused before
anything starts; ``write_reports`` writes <job dir>/report.json and report.html.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..basics import redaction
from ..errors import printable
from ..basics.files import withhold_in_place, write_text_atomic
from ..platform import Platform, detect, open_monitor
from ..records import Report
from ..records.launch import LaunchRecord
from ..basics.rundir import RunDir
from . import ras
from .config import UserJobConfig
from .outcome import build_record
from .policy import library_version
from .supervise import run_user_job
from .torchrun_args import resolve

if TYPE_CHECKING:
    from ..basics.observer import Observer

NAME = "launch"  # run ids read launch-<date>-<time>-<hex>, as the default directory's name does
SUMMARY = "run your own training script as torchrun would, and name the rank that fails or hangs it"
Config, Record = UserJobConfig, LaunchRecord
checks, summary = LaunchRecord.checks, LaunchRecord.summary  # the kind's hooks (records.core) are the record's own
OUT_OPTION = "--out"


def run(config: UserJobConfig, observer: "Observer | None" = None, platform: Platform | None = None) -> LaunchRecord:
    """The job's record; the observer's console hears where the job directory is first. ``platform``: this machine
    (detected when not given), whose monitor samples the ranks and whose RAS service --ras asks."""
    request = resolve(config)
    # The job's secrets (its program's arguments, its ranks' environment) are withheld from its files and report.
    redaction.learn(request.target.args, {**os.environ, **request.worker_env})
    machine = platform or detect(with_memory=False)
    ras_plan = ras.plan(request.ras, machine.spec.ras, machine.collective_library, library_version(machine)[0],
                        {**os.environ, **request.worker_env})  # what the ranks will see
    job = RunDir.create(request.out, NAME, option=OUT_OPTION)
    console = observer.console if observer is not None else None
    # What the job's console shows (the straggler watch's lines too, from its thread while the ranks print theirs);
    # printable: the path and the lines hold the user's words.
    say = None if console is None else lambda line: console.print(printable(line), markup=False, highlight=False)
    if say is not None:
        say(f"ddplab launch: job directory {job.path}")
    with contextlib.closing(open_monitor(machine.spec)) as monitor:
        outcome, sampler = run_user_job(request, job, monitor, ras_plan, device_type=machine.device_type, say=say)
    for log in job.path.rglob("*.log"):  # what the ranks printed, where --log-dir put it inside the job directory
        withhold_in_place(log)
    return build_record(outcome, sampler.timeseries(), ran_with=request.launch_config())


def config_as_run(config: UserJobConfig, record: LaunchRecord) -> UserJobConfig:
    """The options the job ran with (the single-machine rendezvous ddplab chose, secrets withheld)."""
    return record.ran_with or config


def write_reports(report: Report) -> None:
    """<job dir>/report.json and report.html (and the hang's timeline as a trace-event file beside the page)."""
    from ..report.page import write_page

    job = RunDir(Path(report.results.job_dir), report.results.run_id)
    write_text_atomic(job.report_file, json.dumps(report.to_json(), default=str))
    write_page(report, job.page_file)
