"""The job a launcher starts, described once for a lab stage, a drill and the user's own script under `ddplab launch`
(``job_spec``): where it listens (cluster/exposure.py), elastic's configuration with that meeting's rendezvous, the
environment its ranks get; supervision/job.run_job runs it. A user's job runs through the boot module exactly as
every drill does, and its sampler queries the device whenever it samples: a user's script marks no timed windows.
"""

from __future__ import annotations

import dataclasses
import os

from ..cluster.exposure import Exposure, Meeting, Rendezvous, meet, placed_by_user, where_to_listen
from ..platform import DeviceMonitor
from ..basics.redaction import redact_argv
from ..basics.rundir import RunDir
from ..supervision.sampler import RankSampler
from ..supervision.job import JobOutcome, JobSpec, StragglerPlan, run_job
from .ras import RasPlan
from .torchrun_args import LaunchRequest

BOOT_MODULE = "ddplab.job.boot"
SAMPLE_INTERVAL_S = 0.5
MAX_SAMPLES = 1000  # then the sampler halves its series and doubles its interval (a job may run for days)


def job_spec(run: RunDir, config, exposure: Exposure, *, entrypoint, args: tuple, env: dict[str, str],
             rdzv: Rendezvous | None = None, **more) -> JobSpec:
    """This machine's ranks (``config.nproc_per_node``) running ``entrypoint(*args)``: they meet where ``exposure``
    says (across machines through ddplab's rendezvous ``rdzv``), elastic runs torch's LaunchConfig ``config`` with
    that meeting's rendezvous, and every rank inherits ``env``. ``more``: JobSpec's other fields."""
    nproc = int(config.nproc_per_node)
    env = dict(env)
    if nproc > 1 and "OMP_NUM_THREADS" not in os.environ:
        # What torchrun does: N ranks each spinning up all-core thread pools overload the host.
        env["OMP_NUM_THREADS"] = "1"
    return JobSpec(run=run, nproc=nproc, entrypoint=entrypoint, args=args, env=env, exposure=exposure,
                   meeting=lambda: meet(exposure, config.rdzv_backend, rdzv),
                   make_config=lambda met: with_meeting(config, met), **more)


def with_meeting(config, met: Meeting):
    """elastic's configuration with the rendezvous ``met`` names (unchanged where it is the user's own), and how
    that rendezvous names this machine across machines."""
    if met.backend == config.rdzv_backend and not met.configs and met.local_addr is None:
        return config
    named = {"local_addr": met.local_addr} if met.local_addr is not None and hasattr(config, "local_addr") else {}
    return dataclasses.replace(config, rdzv_backend=met.backend, rdzv_configs={**config.rdzv_configs, **met.configs},
                               **named)


def run_user_job(request: LaunchRequest, run: RunDir, monitor: DeviceMonitor, ras: RasPlan | None = None,
                 device_type: str = "cpu", say=None) -> tuple[JobOutcome, RankSampler]:
    """The job from start to end. ``ras``: the RAS service to ask on a hang (None: never); ``device_type``: whose
    library's socket variable is pinned to loopback; ``say``: where the straggler watch's lines go."""
    sampler = RankSampler(run, monitor, interval_s=SAMPLE_INTERVAL_S, query_device_while_timing=True,
                          max_samples=MAX_SAMPLES)
    spec = job_spec(run, request.config, where_the_job_listens(request, device_type), entrypoint=request.python,
                    args=("-u", "-m", BOOT_MODULE, *request.target.boot_argv()), env=request.worker_env,
                    hang_timeout_s=request.hang_timeout_s,
                    expected=list(range(request.nproc_per_node)) if request.single_node else [],  # known beforehand
                    description={"target": redact_argv(request.target.boot_argv()), "torchrun": request.torchrun},
                    sampler=sampler, ras=ras, stragglers=straggler_plan(request, say))
    return run_job(spec), sampler


def straggler_plan(request: LaunchRequest, say) -> StragglerPlan:
    """Watched unless switched off, or unless the job is one rank: nobody waits for it, and its reads (with the device
    timing they ask of the recorder) would be all cost."""
    if not request.stragglers:
        return StragglerPlan(enabled=False, say=say, why_off="--no-stragglers")
    alone = request.nproc_per_node == 1 and request.single_node
    return StragglerPlan(enabled=not alone, say=say, why_off="a job of one rank: no rank waits for another")


def where_the_job_listens(request: LaunchRequest, device_type: str) -> Exposure:
    """One machine: loopback only (over the ranks' environment, so that a socket variable the user set is kept).
    Otherwise the user's rendezvous, as they asked for it, with the reason."""
    theirs = request.rendezvous_theirs
    if theirs is not None:
        return placed_by_user(request.config, theirs)
    return where_to_listen(1, request.loopback_endpoint, device_type, environ={**os.environ, **request.worker_env})
