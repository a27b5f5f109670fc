"""The per-rank entry point the launcher starts (``rank_main``, in a process elastic spawned): guard, set up the
device and the process group, run one workload from the registry, return its result through elastic.
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ..records.placement import Placement
from ..records.codec import to_json
from ..records.session import RankReturn
from ..basics.rundir import RunDir
from ..supervision.beacon import Beacon
from ..supervision.rank import RankLife, error_text, ignore_sigint


@dataclass(frozen=True)
class RankJob:
    """What every rank of a run is asked to do; it reaches ``rank_main`` unchanged (elastic pickles it)."""

    workload: str  # a name in workloads.WORKLOADS
    settings: Any  # the workload's own frozen settings (records/<measurement>.py)
    placement: Placement
    timeout_s: float  # the process-group timeout
    platform_backend: str  # the vendor's backend: only it gets eager communicator creation

    def describe(self) -> dict:
        """The job as people read it in job.json."""
        return to_json(self)


@dataclass
class RankContext:
    """What a workload gets: who it is, its device, its settings, its status writer."""

    rank: int
    local_rank: int
    world_size: int
    runtime: Any  # platform.DeviceRuntime
    settings: Any  # RankJob.settings
    status: Beacon | None = None

    @property
    def device(self):
        return self.runtime.device


def rank_main(job: RankJob) -> RankReturn:
    """A rank elastic started for ddplab's launcher: its return travels back through elastic."""
    life = RankLife(RunDir.from_environ()).arm()
    ignore_sigint()
    own = _as_rank(job, life, gather=False)[0]
    # The rank's work is done and written: its exit need not collect torch's objects (about 0.25 s, cli.py).
    gc.freeze()
    return own


def rank_of_torchrun(job: RankJob, run: RunDir) -> dict[int, RankReturn]:
    """This process is one of torchrun's ranks: run the job here, as that rank. Returns what every rank returned,
    by global rank (gathered before the group is destroyed, for rank 0's report); raises what the workload raised.
    torchrun's agent is this rank's launcher: its death, or its SIGTERM, ends the rank at once."""
    life = RankLife(run).arm(launcher_pid=os.getppid())
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    ignore_sigint()
    return _as_rank(job, life, gather=True)[1]


def _as_rank(job: RankJob, life: RankLife, gather: bool) -> tuple[RankReturn, dict[int, RankReturn]]:
    """Run the job as the rank elastic's variables name (elastic's or torchrun's: the same variables)."""
    life.catch_fatal_signals()
    status = life.start_beacon(phase="before-init")
    try:
        own, returns = _run(job, life.rank, life.local_rank, int(os.environ["WORLD_SIZE"]), status, gather)
    except BaseException as exc:
        life.record_error(exc, error_text(exc), None)
        status.close()
        raise
    status.phase("finished", exit_code=0)
    status.close()
    return own, returns


def _run(job: RankJob, rank: int, local_rank: int, world_size: int, status: Beacon,
         gather: bool) -> tuple[RankReturn, dict[int, RankReturn]]:
    """Device, process group, workload; with ``gather``, every rank's return shared with every rank."""
    placement = job.placement
    os.environ.update(placement.env)  # before torch.distributed creates any communicator

    import torch.distributed as dist

    from ..platform import DeviceRuntime
    from ..workloads import get_workload

    workload = get_workload(job.workload)
    runtime = DeviceRuntime(placement.device_type, placement.device_indices[local_rank])
    runtime.activate()
    capped = runtime.cap_memory(placement.memory_fraction)
    ctx = RankContext(rank, local_rank, world_size, runtime, job.settings, status)
    if hasattr(workload, "before_init"):  # e.g. a drill's late rank
        workload.before_init(ctx)

    init_kwargs = {"backend": placement.backend, "timeout": timedelta(seconds=job.timeout_s)}
    if placement.backend == job.platform_backend and not runtime.host_only:
        # Eager communicator creation: refusals ("Duplicate GPU detected") surface in init, not at the first collective.
        init_kwargs["device_id"] = runtime.device
    status.phase("in-init")
    dist.init_process_group(**init_kwargs)
    status.phase("running")
    result = workload.run(ctx)
    own = RankReturn(rank=rank, local_rank=local_rank, world_size=world_size, pid=os.getpid(),
                     hostname=socket.gethostname(), device=str(runtime.device), backend=placement.backend,
                     memory_cap_applied=capped, result=result)
    if gather:  # pickled, sized, padded and all_gathered (workloads/machines.py)
        from ..workloads.machines import gather_objects

        returns = {value.rank: value for value in gather_objects(own, runtime.device)}
    else:
        returns = {}
    # Only after success: destroying a communicator while peers wait inside a collective blocks, and would hide
    # this rank's own error.
    settle_before_destroying_gloo()
    dist.destroy_process_group()
    return own, returns


def settle_before_destroying_gloo() -> None:
    """Before torch 2.8 destroying a gloo group held the GIL its worker thread waited for, freeing a finished
    collective's tensor: a deadlock (fixed in torch 2.8). A moment for that thread to finish first avoids it."""
    import torch
    import torch.distributed as dist

    if dist.get_backend() == "gloo" and tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 8):
        time.sleep(0.1)
