"""One supervised job: torch's elastic launcher (torchrun's engine, called as a library) runs
every rank through the boot module, with the watcher and the sampler beside it; afterwards,
what each rank left behind is gathered as evidence and the culprits are named.

The sampler (sampler.py) reads each rank's memory and CPU time every SAMPLE_INTERVAL_S through
the pid files the ranks write where RunDir keeps them. It queries the device whenever it
samples: a user's script marks no timed windows for it to keep out of (timed_windows.py).

A job on one machine listens on loopback only, as every run of the lab: it meets through the lab's loopback
rendezvous (launch.one_machine_rendezvous) in place of torch's store on every interface, and its ranks get the
collectives' socket variables pinned to loopback unless the user set them. A job across machines, or one whose
endpoint the user put on another address, is launched as torchrun would (docs/exposure.md).

elastic_launch runs in the calling thread, which must be the launcher's main thread: the
ranks' PR_SET_PDEATHSIG fires when the thread that started them ends (docs/flight-recorder.md,
"torchrun and processes"), so that thread must live as long as the launcher.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from dataclasses import dataclass, field

import psutil

from .. import procs
from ..env_vars import environ_set
from ..exposure import Exposure, where_to_listen
from ..launch import CannotListen, OneMachineMeeting, one_machine_rendezvous
from ..platform import DeviceMonitor
from ..records.launch import JobHang, LeftProcess
from ..records.listen import Listened
from ..records.session import Timeseries
from ..sampler import RankSampler
from . import flight
from .layout import JobDir
from .ras import RasPlan
from .torchrun_args import LaunchRequest
from .watch import Watcher

BOOT_MODULE = "ddplab.job.boot"
LEFTOVER_WAIT_S = 5.0
SAMPLE_INTERVAL_S = 0.5
MAX_SAMPLES = 1000  # then the sampler halves its series and doubles its interval (a job may run for days)
TEARDOWN_SIGNALS = ("SIGTERM", "SIGKILL")


@dataclass(frozen=True)
class ElasticFailure:
    """How torch's elastic launcher saw one rank fail (its ProcessFailure, as plain values)."""

    local_rank: int
    pid: int
    exitcode: int | None
    ended_by: str  # "exit 1", "SIGKILL", ...
    timestamp: float


@dataclass
class JobOutcome:
    job: JobDir
    started_at: float
    ended_at: float
    ok: bool
    failures: dict[int, ElasticFailure] = field(default_factory=dict)  # global rank -> how elastic saw it fail
    torchrun_root_cause_rank: int | None = None  # the rank torchrun would blame (first to fail)
    launcher_error: str | None = None
    interrupted: bool = False
    hang: JobHang | None = None
    first_failure_seen_at: float | None = None
    left_running: list[LeftProcess] = field(default_factory=list)
    timeseries: Timeseries | None = None
    listen: Listened | None = None  # where the job's store and the ranks' sockets listened (exposure.py)

    @property
    def detected_at(self) -> float | None:
        """When ddplab knew the job had gone wrong: the hang declaration, a rank's error
        record, or elastic's return, whichever came first."""
        if self.ok:
            return None
        if self.hang:
            return self.hang.declared_at
        return min(t for t in (self.first_failure_seen_at, self.ended_at) if t is not None)


def run_job(request: LaunchRequest, job: JobDir, monitor: DeviceMonitor, ras: RasPlan | None = None,
            device_type: str = "cpu") -> JobOutcome:
    """The job from start to end. ``ras``: the RAS service to ask on a declared hang (None: never).
    ``device_type``: this machine's (platform.detect), whose collective library's socket variable is pinned to
    loopback, with gloo's, for a one-machine job."""
    exposure = where_the_job_listens(request, device_type)
    started = time.time()
    outcome = JobOutcome(job, started, started, ok=False, listen=exposure.record())
    try:
        with one_machine_rendezvous(exposure, otherwise=request.config.rdzv_backend) as meeting:
            outcome.listen = meeting.exposure.record()
            _supervise(request, _elastic_config(request.config, meeting), meeting.exposure.environment(), job,
                       monitor, ras, outcome)
    except CannotListen as exc:  # nothing started: a report that says so
        outcome.launcher_error, outcome.ended_at = str(exc), time.time()
    outcome.left_running = leftovers(job.run_id)
    return outcome


def where_the_job_listens(request: LaunchRequest, device_type: str) -> Exposure:
    """One machine: loopback only, as every run of the lab (exposure.where_to_listen over the environment the
    ranks will see, so that a socket variable the user set is kept). Otherwise the user's rendezvous, as they
    asked for it, with the reason (torchrun_args.why_rendezvous_is_theirs)."""
    theirs = request.rendezvous_theirs
    if theirs is None:
        return where_to_listen(1, request.loopback_endpoint, device_type, environ={**os.environ, **request.worker_env})
    config = request.config
    return Exposure(single_machine=config.max_nodes == 1, loopback_store=False,
                    store=f"{config.rdzv_endpoint or '(no endpoint)'} (torch's {config.rdzv_backend} rendezvous)",
                    store_port=_port_named(config.rdzv_endpoint), why_not=(theirs[0].upper() + theirs[1:] + ".",))


def _port_named(endpoint: str) -> int:
    port = (endpoint or "").rpartition(":")[2]
    return int(port) if port.isdigit() else 0


def _elastic_config(config, meeting: OneMachineMeeting):
    """elastic's configuration with the rendezvous ``meeting`` names: the same as asked when it is the user's
    own (no loopback store here), the loopback handler and its socket otherwise."""
    if meeting.backend == config.rdzv_backend and not meeting.configs:
        return config
    return dataclasses.replace(config, rdzv_backend=meeting.backend,
                               rdzv_configs={**config.rdzv_configs, **meeting.configs})


def _supervise(request: LaunchRequest, config, listen_env: dict[str, str], job: JobDir, monitor: DeviceMonitor,
               ras: RasPlan | None, outcome: JobOutcome) -> None:
    """elastic_launch with the watcher and the sampler beside it; what happened goes into ``outcome``."""
    from torch.distributed.elastic.multiprocessing import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import elastic_launch

    # listen_env: the collectives' socket variables pinned to loopback, for the ranks (the user's own are kept)
    env = {**request.worker_env, **listen_env, **job.rank_environment(os.getpid(), procs.start_ticks(os.getpid()))}
    sampler = RankSampler(job.run_dir, monitor, interval_s=SAMPLE_INTERVAL_S, query_device_while_timing=True,
                          max_samples=MAX_SAMPLES)
    with environ_set(env), sampler, Watcher(job, request.hang_timeout_s, ras=ras) as watcher:
        try:
            elastic_launch(config, request.python)("-u", "-m", BOOT_MODULE, *request.target.boot_argv())
            outcome.ok = True
        except ChildFailedError as exc:
            outcome.failures = {int(rank): _failure(f) for rank, f in exc.failures.items()}
            outcome.torchrun_root_cause_rank = int(exc.get_first_failure()[0])
        except SignalException as exc:  # SIGINT/SIGTERM to ddplab: elastic stopped the ranks
            outcome.interrupted, outcome.launcher_error = True, f"interrupted: {exc}"
        except Exception as exc:  # rendezvous or agent failure: still a report, never a traceback
            outcome.launcher_error = f"{type(exc).__name__}: {exc}"
        outcome.ended_at = time.time()
    outcome.hang, outcome.first_failure_seen_at = watcher.hang, watcher.first_failure_seen_at
    outcome.timeseries = sampler.timeseries()


def gather_evidence(request: LaunchRequest, outcome: JobOutcome) -> dict[int, flight.RankEvidence]:
    """Everything each rank left in the job directory, and how elastic saw it end."""
    job = outcome.job
    request_id = (job.read_request() or {}).get("id")
    torn_down = outcome.hang.torn_down if outcome.hang else set()
    evidence = {}
    for rank in sorted(set(job.ranks_seen()) | set(outcome.failures) | set(expected_ranks(request))):
        failure = outcome.failures.get(rank)
        ev = flight.RankEvidence(rank, status=job.read_status(rank), error=job.read_error(rank),
                                 answered=request_id is not None and job.answered(rank) == request_id)
        ev.record = flight.load_record(job.flight_file(rank)) or _torch_dump(job, rank)
        if failure:
            ev.ended_by = failure.ended_by
            ev.stopped_by_launcher = rank in torn_down or _ended_in_teardown(rank, outcome.failures)
        elif outcome.ok or (ev.status or {}).get("phase") == "finished":
            ev.ended_by = "exit 0"
        elif ev.status is not None:  # not among elastic's failures: it was stopped with the group
            ev.ended_by, ev.stopped_by_launcher = "the launcher's teardown", True
        evidence[rank] = ev
    return evidence


def _ended_in_teardown(rank: int, failures: dict[int, ElasticFailure]) -> bool:
    """SIGTERM or SIGKILL after another rank had failed on its own: elastic stopping the group."""
    mine = failures[rank]
    if mine.ended_by not in TEARDOWN_SIGNALS:
        return False
    return any(f.timestamp <= mine.timestamp and f.ended_by not in TEARDOWN_SIGNALS
               for r, f in failures.items() if r != rank)


def expected_ranks(request: LaunchRequest) -> list[int]:
    """The global ranks this machine starts, when that is known without asking the rendezvous."""
    return list(range(request.nproc_per_node)) if request.single_node else []


def leftovers(run_id: str) -> list[LeftProcess]:
    """Processes still carrying this job's run id (ranks, or what they started), after a short wait."""
    return [LeftProcess(pid, _cmdline(pid)) for pid in procs.leaked(run_id, [], LEFTOVER_WAIT_S)]


def _cmdline(pid: int) -> str:
    from ..redaction import redact_argv

    try:
        return " ".join(redact_argv(psutil.Process(pid).cmdline()))[:200]  # redacted before cut: no half secret
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return ""


def _failure(f) -> ElasticFailure:
    """Elastic's ProcessFailure as plain values: exit code or signal, and when."""
    ended_by = f"exit {f.exitcode}"
    if f.exitcode is not None and f.exitcode < 0:
        try:
            ended_by = signal.Signals(-f.exitcode).name
        except ValueError:
            ended_by = f"signal {-f.exitcode}"
    return ElasticFailure(local_rank=f.local_rank, pid=f.pid, exitcode=f.exitcode, ended_by=ended_by,
                          timestamp=float(f.timestamp))


def _torch_dump(job: JobDir, rank: int) -> dict | None:
    """torch's own dump (e.g. written when a collective times out) when the rank wrote none of ddplab's."""
    prefix = job.torch_dump_prefix
    return flight.load_record(type(job.path)(f"{prefix}{rank}"))
