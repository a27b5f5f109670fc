"""The per-rank entry point the launcher starts: guard, set up the device and the
process group, run one workload from the registry, return its result.

``rank_main`` runs in a process spawned by torch.distributed.elastic; what it
returns travels back to the launcher through elastic's return-value queue.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Mapping

from .files import write_text_atomic
from .policy import Placement
from .records.codec import to_json
from .records.session import RankReturn
from .rundir import LAUNCHER_PID_ENV, STATUS_STORE_ENV, RunDir
from .status import RankStatus

_PR_SET_PDEATHSIG = 1


def guard_parent(launcher_pid: int, poll_s: float = 0.25) -> None:
    """Make sure this rank dies when the launcher dies, even by SIGKILL.

    PR_SET_PDEATHSIG is immediate but tied to the parent *thread* (docs/background.md §3), so a
    watcher thread also polls the parent and the launcher and kills this rank if
    either is gone.
    """
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass

    def orphaned() -> bool:
        if os.getppid() != parent:
            return True
        try:
            os.kill(launcher_pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        return False

    if orphaned():  # the launcher died before the guard was armed
        os.kill(os.getpid(), signal.SIGKILL)

    def watch():
        while True:
            time.sleep(poll_s)
            if orphaned():
                os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="ddplab-parent-guard", daemon=True).start()


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
    status: RankStatus | None = None

    @property
    def device(self):
        return self.runtime.device


def ignore_sigint() -> None:
    """Ctrl+C is the launcher's to handle: it stops the ranks with SIGTERM (launch.py), so a rank
    that also took the terminal's SIGINT would only add a KeyboardInterrupt traceback per rank.

    The launcher starts ranks with SIGINT blocked; one that arrived during start-up is pending,
    and setting SIG_IGN discards it before the unblock.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def rank_main(job: RankJob) -> RankReturn:
    """A rank elastic started for ddplab's launcher: its return travels back through elastic."""
    run = RunDir.from_environ()
    guard_parent(int(os.environ[LAUNCHER_PID_ENV]))
    ignore_sigint()
    own, _ = _as_rank(job, run, gather=False)
    return own


def rank_of_torchrun(job: RankJob, run: RunDir) -> dict[int, RankReturn]:
    """This process is one of torchrun's ranks (ddplab started as each of its workers): run the job here, as
    that rank, without a launcher of ddplab's. Returns what every rank of the job returned, by global rank:
    gathered before the process group is destroyed, so that global rank 0 can write the job's report.
    Raises whatever the workload raised; torchrun sees this rank fail.

    torchrun's agent is this rank's launcher: its death ends the rank too (no orphan, unlike a plain
    torchrun worker), and its SIGTERM (how torchrun stops its workers, on Ctrl+C too) ends it at once.
    """
    guard_parent(os.getppid())
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    ignore_sigint()
    _, returns = _as_rank(job, run, gather=True)
    return returns


def _as_rank(job: RankJob, run: RunDir, gather: bool) -> tuple[RankReturn, dict[int, RankReturn]]:
    """Run the job as the rank elastic's variables name (elastic's or torchrun's: the same variables)."""
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    write_text_atomic(run.pid_file(rank), f"{os.getpid()}\n")
    status = rank_status(run, rank, local_rank, world_size)
    _stacks_on_sigusr1(run, rank)
    try:
        own, returns = _run(job, rank, local_rank, world_size, status, gather)
    except BaseException as exc:
        status.fail(f"{type(exc).__name__}: {exc}"[-2000:])
        status.close()
        raise
    status.phase("finished")
    status.close()
    return own, returns


def rank_status(run: RunDir, rank: int, local_rank: int, world_size: int,
                environ: Mapping[str, str] = os.environ) -> RankStatus:
    """This rank's status writer: its file, and the job's store when the launcher names one (a job across
    machines), with where the rank runs (elastic's node rank, the machine's address toward the endpoint)."""
    from .exposure import NODE_ADDRESS_ENV

    group_rank = environ.get("GROUP_RANK", "")
    return RankStatus(run, rank, local_rank, world_size=world_size,
                      node_rank=int(group_rank) if group_rank.isdigit() else None,
                      address=environ.get(NODE_ADDRESS_ENV), publisher=_status_publisher(rank, environ))


def _status_publisher(rank: int, environ: Mapping[str, str]):
    """A publisher to the job's store (its own client connection), or None: one machine, or a store this
    rank cannot reach (said on stderr; the rank's work does not depend on it)."""
    address = environ.get(STATUS_STORE_ENV)
    if not address:
        return None
    from .cluster.status_store import StatusPublisher, open_store, parse_address

    restart = environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    try:
        store = open_store(*parse_address(address))
    except Exception as exc:  # noqa: BLE001 - any failure to connect leaves the files as the only status
        print(f"ddplab: rank {rank} cannot publish its status to the job's store at {address}: {exc}",
              file=sys.stderr)
        return None
    return StatusPublisher(store, rank, job=environ.get("TORCHELASTIC_RUN_ID", ""),
                           restart_count=int(restart) if restart.isdigit() else 0)


def _run(job: RankJob, rank: int, local_rank: int, world_size: int, status: RankStatus,
         gather: bool) -> tuple[RankReturn, dict[int, RankReturn]]:
    """Device, process group, workload; with ``gather``, every rank's return shared with every rank (an
    all_gather of small objects, before the group is destroyed)."""
    placement = job.placement
    os.environ.update(placement.env)  # before torch.distributed creates any communicator

    import torch.distributed as dist

    from .platform import DeviceRuntime
    from .workloads import get_workload

    workload = get_workload(job.workload)
    runtime = DeviceRuntime(placement.device_type, placement.device_indices[local_rank])
    runtime.activate()
    capped = runtime.cap_memory(placement.memory_fraction)
    ctx = RankContext(rank, local_rank, world_size, runtime, job.settings, status)
    if hasattr(workload, "before_init"):  # e.g. a drill's late rank
        workload.before_init(ctx)

    init_kwargs = {"backend": placement.backend, "timeout": timedelta(seconds=job.timeout_s)}
    if placement.backend == job.platform_backend and not runtime.is_host:
        # Eager communicator creation, so that refusals ("Duplicate GPU detected")
        # surface in init_process_group rather than at the first collective.
        init_kwargs["device_id"] = runtime.device
    status.phase("in-init")
    dist.init_process_group(**init_kwargs)
    status.phase("running")
    result = workload.run(ctx)
    own = RankReturn(rank=rank, local_rank=local_rank, world_size=world_size, pid=os.getpid(),
                     hostname=socket.gethostname(), device=runtime.device_label(), backend=placement.backend,
                     memory_cap_applied=capped, result=result)
    returns = _gather(own, world_size, runtime.device) if gather else {}
    # Only after success: destroying a communicator while peers wait inside a collective
    # blocks (docs/background.md §3), which would hide this rank's own error from everyone.
    dist.destroy_process_group()
    return own, returns


def _gather(own: RankReturn, world_size: int, device) -> dict[int, RankReturn]:
    """Every rank's return, by global rank: pickled, sized, padded and all_gathered as bytes.

    Not all_gather_object: that needs numpy, which torch does not install (workloads/ddp_train.py)."""
    import pickle

    import torch
    import torch.distributed as dist

    if dist.get_backend() == "gloo":
        device = "cpu"  # gloo takes host tensors
    data = pickle.dumps(own)
    sizes = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(world_size)]
    dist.all_gather(sizes, torch.tensor([len(data)], dtype=torch.int64, device=device))
    longest = max(int(t.item()) for t in sizes)
    mine = torch.zeros(longest, dtype=torch.uint8)
    mine[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    everyone = [torch.empty(longest, dtype=torch.uint8, device=device) for _ in range(world_size)]
    dist.all_gather(everyone, mine.to(device))
    returns = {}
    for size, tensor in zip(sizes, everyone):
        host = tensor.cpu().contiguous()
        value = pickle.loads(ctypes.string_at(host.data_ptr(), int(size.item())))  # the job's own ranks wrote it
        returns[value.rank] = value
    return returns


def _stacks_on_sigusr1(run: RunDir, rank: int) -> None:
    """The supervisor sends SIGUSR1 before tearing a hung group down: dump every thread's stack."""
    import faulthandler

    path = run.stack_file(rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "w")  # kept open for the life of the rank: faulthandler writes to its fd
    faulthandler.register(signal.SIGUSR1, file=handle, all_threads=True)
