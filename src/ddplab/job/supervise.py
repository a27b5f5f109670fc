"""The user's own job as a supervised job (supervision/job.py), run through the boot module exactly as every lab
stage and drill runs. A job on one machine listens on loopback only, as every run of the lab; a job across
machines, or on an endpoint the user put elsewhere, is launched as torchrun would. The sampler queries the device
whenever it samples: a user's script marks no timed windows.
"""

from __future__ import annotations

import dataclasses
import os

from ..cluster.exposure import Exposure, where_to_listen
from ..platform import DeviceMonitor
from ..basics.redaction import redact_argv
from ..basics.rundir import RunDir
from ..supervision.sampler import RankSampler
from ..supervision import meeting
from ..supervision.job import JobOutcome, JobSpec, StragglerPlan, run_job
from ..basics.validators import port_number
from .ras import RasPlan
from .torchrun_args import LaunchRequest

BOOT_MODULE = "ddplab.job.boot"
SAMPLE_INTERVAL_S = 0.5
MAX_SAMPLES = 1000  # then the sampler halves its series and doubles its interval (a job may run for days)


def run_user_job(request: LaunchRequest, run: RunDir, monitor: DeviceMonitor, ras: RasPlan | None = None,
                 device_type: str = "cpu", say=None) -> tuple[JobOutcome, RankSampler]:
    """The job from start to end. ``ras``: the RAS service to ask on a hang (None: never); ``device_type``: whose
    library's socket variable is pinned to loopback; ``say``: where the straggler watch's lines go."""
    exposure = where_the_job_listens(request, device_type)
    if request.rendezvous_theirs is None:
        meet = lambda: meeting.one_machine(exposure, otherwise=request.config.rdzv_backend)  # noqa: E731
    else:
        meet = lambda: meeting.as_asked(exposure, request.config.rdzv_backend)  # noqa: E731
    sampler = RankSampler(run, monitor, interval_s=SAMPLE_INTERVAL_S, query_device_while_timing=True,
                          max_samples=MAX_SAMPLES)
    spec = JobSpec(run=run, nproc=request.nproc_per_node, entrypoint=request.python,
                   args=("-u", "-m", BOOT_MODULE, *request.target.boot_argv()), meeting=meet,
                   make_config=lambda met: elastic_config(request.config, met), env=dict(request.worker_env),
                   hang_timeout_s=request.hang_timeout_s, expected=expected_ranks(request),
                   description={"target": redact_argv(request.target.boot_argv()), "torchrun": request.torchrun},
                   sampler=sampler, ras=ras, exposure=exposure,
                   stragglers=straggler_plan(request, say))
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
    if theirs is None:
        return where_to_listen(1, request.loopback_endpoint, device_type, environ={**os.environ, **request.worker_env})
    config = request.config
    return Exposure(single_machine=config.max_nodes == 1, loopback_store=False,
                    store=f"{config.rdzv_endpoint or '(no endpoint)'} (torch's {config.rdzv_backend} rendezvous)",
                    store_port=_port_named(config.rdzv_endpoint), why_not=(theirs[0].upper() + theirs[1:] + ".",))


def _port_named(endpoint: str) -> int:
    port = (endpoint or "").rpartition(":")[2]
    return port_number(port)


def elastic_config(config, met: meeting.Meeting):
    """elastic's configuration with the rendezvous ``met`` names (unchanged where it is the user's own)."""
    if met.backend == config.rdzv_backend and not met.configs:
        return config
    return dataclasses.replace(config, rdzv_backend=met.backend, rdzv_configs={**config.rdzv_configs, **met.configs})


def expected_ranks(request: LaunchRequest) -> list[int]:
    """The global ranks this machine starts, when that is known without asking the rendezvous."""
    return list(range(request.nproc_per_node)) if request.single_node else []
