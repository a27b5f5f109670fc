"""One multi-rank run of a workload: detect, plan, start the sharing daemon the plan chose (re-planning without
it when it cannot be used), launch, sample, supervise. Shared by every measurement that starts ranks, so each one
only says what its ranks do and how to summarise what they return (a ``Session``: the ``SessionRecord``, each
rank's ``RankReturn`` and the launch's live objects).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from ..basics import numpy_warning
from ..basics.files import write_text_atomic
from ..basics.proc_stat import start_ticks
from ..records.config import LaunchOptions
from ..basics.observer import QUIET, Observer  # noqa: F401 - every run's watcher; commands import it from here
from ..platform import Platform, detect
from ..records.placement import Placement
from ..records.session import SessionRecord
from ..basics.rundir import PLACEMENT_ENV, RunDir
from ..supervision.sampler import RankSampler
from .session_record import session_record, torchrun_job_ranks
from ..supervision import elastic
from ..supervision.elastic import ElasticFailure
from ..supervision.job import Guardian, JobOutcome, run_job
from ..cluster.exposure import Rendezvous, torchruns_store, where_to_listen
from .supervise import BOOT_MODULE, job_spec


@dataclass(frozen=True)
class Workload:
    """What the ranks run: a name in workloads.WORKLOADS and its frozen settings."""

    name: str
    settings: Any


@dataclass
class Session:
    platform: Platform
    placement: Placement
    run: RunDir
    outcome: JobOutcome
    record: SessionRecord
    ended_at: float  # wall time the launch returned
    # Wall-clock (start, end) of each device query the sampler made, for timed_windows.overlaps.
    device_queries: list[tuple[float, float]] = field(default_factory=list)
    # Across machines: every rank's last status as the job's store said; {} on one machine.
    job_states: dict[int, Any] = field(default_factory=dict)

    @property
    def results(self) -> list[Any]:
        """What each rank's workload returned, by global rank."""
        return [self.outcome.return_values[r].result for r in sorted(self.outcome.return_values)]


def prepare(opts: LaunchOptions, with_memory: bool = False) -> tuple[Platform, Placement]:
    """Everything that can refuse the request, before anything is started or written."""
    from .policy import plan

    platform = detect(opts.device, with_memory=with_memory)
    return platform, plan(opts, platform)


def start_sharing_daemon(opts: LaunchOptions, platform: Platform, placement: Placement, run: RunDir,
                         make_daemon: Callable | None = None) -> tuple[Placement, Any]:
    """Start the sharing daemon the placement chose, if any; returns (placement to run, daemon or None), and the
    caller stops a returned daemon. One that cannot be used is stopped at once and the run re-planned without it
    (the policy says why). ``make_daemon(vendor, run_dir)``: the seam tests use to inject one that fails."""
    from ..platform import sharing_daemon as daemon_mod
    from .policy import plan

    if placement.sharing_daemon is None:
        return placement, None
    if make_daemon is not None:
        daemon = make_daemon(platform.spec, run.sharing_daemon_dir)
    else:  # carrying the run's markers: `ddplab clean` tells one left by a launcher that is gone
        daemon = daemon_mod.PrivateDaemon(platform.spec, run.sharing_daemon_dir,
                                          run.marker_env(os.getpid(), start_ticks(os.getpid())))
    try:
        env = daemon.start(placement.device_indices)
    except daemon_mod.DaemonUnusable as exc:
        daemon.stop()
        return plan(opts, platform, daemon_failure=exc.message), daemon
    except BaseException:
        daemon.stop()
        raise
    _tell_the_guardian(run, daemon)
    return replace(placement, env={**placement.env, **env}), daemon


def _tell_the_guardian(run: RunDir, daemon) -> None:
    """daemons.json: how the run's guardian stops this daemon if the launcher dies without stopping it."""
    entry = daemon.guardian_entry()
    if entry is not None:
        with contextlib.suppress(Exception):  # the daemon is stopped in the launcher's finally all the same
            write_text_atomic(run.daemons_file, json.dumps([entry]))


def run_workload(workload: Workload, opts: LaunchOptions, label: str, observer: Observer = QUIET,
                 sample: bool = True, prepared: tuple[Platform, Placement] | None = None,
                 sample_device_while_timing: bool = False) -> Session:
    """Start the planned ranks running ``workload``; return the session once they are all gone. The sampler keeps
    out of the ranks' timed windows unless ``sample_device_while_timing``."""
    from .worker import RankJob, rank_main

    if opts.started_by == "torchrun":
        return _run_as_torchrun_rank(workload, opts, label, prepared)

    def entry(platform: Platform, placement: Placement) -> tuple:
        job = RankJob(workload=workload.name, settings=workload.settings, placement=placement,
                      timeout_s=opts.timeout_s, platform_backend=platform.backend)
        return rank_main, (job,), {}, job.describe()

    return _supervised(entry, opts, label, observer, sample, prepared, controller=None,
                       sample_device_while_timing=sample_device_while_timing, rank_env=None)


def run_script(module: str, args: list[str], opts: LaunchOptions, label: str, observer: Observer = QUIET,
               prepared: tuple[Platform, Placement] | None = None,
               controller: Callable[[RunDir], None] | None = None,
               rank_env: dict[str, str] | None = None, stragglers=None) -> Session:
    """The planned ranks running ``python -m module args`` as `ddplab launch` runs a script, the placement in
    DDPLAB_DRILL_PLACEMENT (the drills do). ``controller(run)`` runs in a launcher-side thread while the ranks run
    (drills inject from there); ``rank_env``: variables every rank sets before init, on top of the placement's;
    ``stragglers``: the straggler watch's plan, None: not watched."""

    def entry(platform: Platform, placement: Placement) -> tuple:
        plan = {"backend": placement.backend, "device_type": placement.device_type,
                "devices": list(placement.device_indices), "memory_fraction": placement.memory_fraction}
        env = {**placement.env, PLACEMENT_ENV: json.dumps(plan)}
        return sys.executable, ("-u", "-m", BOOT_MODULE, "-m", module, *args), env, \
            {"script": ["-m", module, *args], "placement": plan}

    return _supervised(entry, opts, label, observer, True, prepared, controller, True, rank_env, stragglers)


def _supervised(entry, opts: LaunchOptions, label: str, observer: Observer, sample: bool,
                prepared: tuple[Platform, Placement] | None, controller,
                sample_device_while_timing: bool, rank_env: dict[str, str] | None, stragglers=None) -> Session:
    """The planned ranks running what ``entry(platform, placement)`` says, under the one supervisor."""
    from ..report import terminal
    from ..platform import open_monitor

    platform, placement = prepared or prepare(opts)
    run = RunDir.create(opts.run_dir, label)
    console = observer.console
    monitor = daemon = None
    guardian = Guardian(run).__enter__()  # before the daemon: nothing the run starts outlives a SIGKILLed ddplab
    try:
        placement, daemon = start_sharing_daemon(opts, platform, placement, run)
        if rank_env:
            placement = replace(placement, env={**placement.env, **rank_env})
        if console is not None:
            terminal.announce(console, placement, run)
            if daemon is not None:
                console.print(f"sharing daemon: {daemon.describe()}")
        entrypoint, args, env, description = entry(platform, placement)
        # the lab's ranks import torch without numpy on a fresh system Python: no stray warning (a user's job is theirs)
        env = {**env, "PYTHONWARNINGS": numpy_warning.for_ranks(os.environ.get("PYTHONWARNINGS"))}
        monitor = open_monitor(platform.spec)
        rdzv = Rendezvous.from_options(opts)
        with terminal.live_ranks(console if observer.live else None) as update:
            sampler = RankSampler(run, monitor, on_sample=update, enabled=sample,
                                  query_device_while_timing=sample_device_while_timing)
            exposure = where_to_listen(rdzv.nnodes, rdzv.endpoint, placement.device_type, rdzv_host=rdzv.host)
            outcome = run_job(job_spec(run, lab_config(run, placement.nproc, rdzv), exposure, entrypoint=entrypoint,
                                       args=args, env=env, rdzv=rdzv, hang_timeout_s=opts.hang_timeout_s,
                                       job_id=rdzv.run_id or "", description=description, sampler=sampler,
                                       controller=controller, guardian=False, stragglers=stragglers))
            ended_at = time.time()
    finally:
        if monitor is not None:
            monitor.close()
        if daemon is not None:
            daemon.stop()  # never leave a daemon behind, least of all one a crashed rank may have poisoned
        # Not an ExitStack: if stopping the daemon raised (a second Ctrl+C during its 35 s quit), the guardian must
        # not be told the run ended well, so that it ends the daemon itself once this launcher is gone.
        guardian.__exit__(None, None, None)
    record = replace(session_record(placement, run, outcome, sampler, daemon.record() if daemon else None,
                             outcome.hang, opts.nnodes), platform=platform, culprit=outcome.culprit,
                     machines_lost=None if outcome.ok else outcome.machines_lost)
    return Session(platform, placement, run, outcome, record, ended_at, list(sampler.device_queries),
                   dict(outcome.job_states))


def lab_config(run: RunDir, nproc: int, rdzv: Rendezvous):
    """torch's LaunchConfig for a lab run: torch's c10d rendezvous as the lab's options name it, which the meeting
    replaces with ddplab's own (job/supervise.job_spec); every rank's output in the run's logs."""
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std

    return elastic.launch_config(
        min_nodes=rdzv.nnodes, max_nodes=rdzv.nnodes, nproc_per_node=nproc, run_id=rdzv.run_id or run.run_id,
        rdzv_backend="c10d", rdzv_endpoint=rdzv.endpoint,
        rdzv_configs={"join_timeout": rdzv.join_timeout_s, "timeout": rdzv.join_timeout_s},
        max_restarts=0, monitor_interval=0.1, start_method="spawn",
        logs_specs=DefaultLogsSpecs(log_dir=str(run.logs_dir), redirects=Std.ALL, tee=Std.NONE),
        shutdown_timeout=5, signals_to_handle=elastic.ELASTIC_SIGNALS)


def _run_as_torchrun_rank(workload: Workload, opts: LaunchOptions, label: str,
                          prepared: tuple[Platform, Placement] | None) -> Session:
    """ddplab started as one of torchrun's workers (torchrun watches; no sampler, supervisor or daemon of ddplab's):
    run the workload here as that rank. Every rank gets every rank's return; global rank 0 writes the report."""
    from ..platform import open_monitor
    from .worker import RankJob, rank_of_torchrun

    platform, placement = prepared or prepare(opts)
    rank = int(os.environ["RANK"])
    # Every rank is a process of its own here: one run directory each (one directory holds one run).
    run = RunDir.create(os.path.join(opts.run_dir, f"rank{rank}") if opts.run_dir else None, label)
    job = RankJob(workload=workload.name, settings=workload.settings, placement=placement, timeout_s=opts.timeout_s,
                  platform_backend=platform.backend)
    start = time.monotonic()
    outcome = JobOutcome(run, time.time(), time.time())
    try:
        outcome.return_values, outcome.ok = rank_of_torchrun(job, run), True
    except Exception as exc:  # noqa: BLE001 - this rank's failure is the report's (torchrun sees it too)
        outcome.failures = {rank: _failed_here(exc)}
    outcome.duration_s = time.monotonic() - start
    outcome.listen = torchruns_store(opts.nnodes).record()
    with contextlib.closing(open_monitor(platform.spec)) as monitor:
        sampler = RankSampler(run, monitor, enabled=False)  # torchrun's workers are not sampled
    record = replace(session_record(placement, run, outcome, sampler, None, None, opts.nnodes), platform=platform,
                     ranks=torchrun_job_ranks(placement, outcome))
    return Session(platform, placement, run, outcome, record, time.time())


def _failed_here(exc: BaseException):
    return ElasticFailure(local_rank=int(os.environ.get("LOCAL_RANK", "0")), pid=os.getpid(), exitcode=1, signal=None,
                          message="".join(traceback.format_exception(exc)), timestamp=time.time())
