"""Start ranks through torch.distributed.elastic (torchrun's engine, used as a library).

One run = one run directory:
    <run_dir>/
        job.json             what every rank was asked to do
        pids/<rank>          each rank's pid, written by the rank itself (the sampler reads it)
        logs/<elastic run id>_*/attempt_0/<local_rank>/{stdout,stderr}.log, error.json

Workers must not outlive the launcher (plain torchrun leaves orphans holding device
memory when its agent is SIGKILLed, measured.md). Elastic cannot guarantee that, so
every rank arms a parent-death guard first thing (``worker.guard_parent``). This
module knows nothing about what the ranks compute.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .exposure import where_to_listen

DEFAULT_RUNS_DIR = "ddplab-runs"
RUN_ID_ENV = "DDPLAB_RUN_ID"  # every worker carries it: how `ddplab clean` recognises our ranks
RUN_DIR_ENV = "DDPLAB_RUN_DIR"
LAUNCHER_PID_ENV = "DDPLAB_LAUNCHER_PID"
# The launcher's start time in clock ticks since boot: with its pid, an identity that reads the
# same from any PID namespace (a pid alone does not), so `ddplab clean` can tell whether it lives.
LAUNCHER_START_ENV = "DDPLAB_LAUNCHER_START"


@dataclass(frozen=True)
class RunDir:
    path: Path
    run_id: str

    @classmethod
    def create(cls, base: str | None, label: str) -> "RunDir":
        run_id = f"{label}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        path = Path(base) if base else Path(DEFAULT_RUNS_DIR) / run_id
        path.mkdir(parents=True, exist_ok=True)
        (path / "pids").mkdir(exist_ok=True)
        return cls(path.resolve(), run_id)

    def rank_pids(self) -> dict[int, int]:
        out = {}
        for f in (self.path / "pids").glob("*"):
            try:
                out[int(f.name)] = int(f.read_text().strip())
            except (ValueError, OSError):
                continue
        return out

    def log_files(self, local_rank: int) -> list[Path]:
        return sorted(self.path.glob(f"logs/*/attempt_*/{local_rank}/std*.log"))


@dataclass
class RankFailure:
    rank: int
    local_rank: int
    pid: int
    exitcode: int
    signal: str | None  # SIGKILL, SIGABRT ... when the rank died by a signal
    message: str  # the rank's own exception text, from its elastic error file
    timestamp: float
    log_tail: str = ""


@dataclass
class LaunchResult:
    run_id: str
    run_dir: str
    ok: bool
    duration_s: float
    return_values: dict[int, dict] = field(default_factory=dict)  # global rank -> rank's result
    failures: dict[int, RankFailure] = field(default_factory=dict)
    torchrun_root_cause_rank: int | None = None  # the rank elastic would blame (first to fail)
    launcher_error: str | None = None
    interrupted: bool = False  # the launcher itself got SIGINT/SIGTERM
    listen: dict = field(default_factory=dict)  # where the store and the ranks' sockets listened (exposure.py)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Rendezvous:
    nnodes: int = 1
    endpoint: str = "127.0.0.1:0"  # one machine: the loopback store (rendezvous.py) on a free port
    join_timeout_s: float = 120.0

    @property
    def run_id(self) -> str | None:
        """Every machine of a job must name the same rendezvous; one machine uses its own run id."""
        return f"ddplab-{self.endpoint}" if self.nnodes > 1 else None


def launch(entrypoint, job: dict, nproc: int, run: RunDir, rdzv: Rendezvous = Rendezvous()) -> LaunchResult:
    """Run ``entrypoint(job)`` in ``nproc`` ranks and gather what each returns.

    On one machine the rendezvous store listens on a socket bound to loopback here, and the
    ranks' collective sockets are pinned to the loopback interface (exposure.py).
    """
    exposure = where_to_listen(rdzv.nnodes, rdzv.endpoint, job["placement"]["device_type"])
    if not exposure.loopback_store:
        result = _launch(entrypoint, job, nproc, run, rdzv, "c10d", {}, exposure.environment())
        result.listen = exposure.to_dict()
        return result
    from . import rendezvous as loopback

    try:
        listener = loopback.bind_loopback(exposure.store_port)
    except OSError as exc:
        return LaunchResult(run.run_id, str(run.path), False, 0.0, listen=exposure.to_dict(),
                            launcher_error=f"cannot listen on {exposure.store}: {exc}")
    with listener:  # the store serves on a duplicate of it; this copy is closed when the launch ends
        exposure = exposure.listening_at(listener.getsockname()[1])
        result = _launch(entrypoint, job, nproc, run, rdzv, loopback.register(),
                         {loopback.LISTEN_FD_KEY: listener.fileno()}, exposure.environment())
    result.listen = exposure.to_dict()
    return result


def _launch(entrypoint, job: dict, nproc: int, run: RunDir, rdzv: Rendezvous, rdzv_backend: str,
            rdzv_configs: dict, socket_env: dict[str, str]) -> LaunchResult:
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, SignalException, Std
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    _quiet_elastic_logging()
    (run.path / "job.json").write_text(json.dumps(job, indent=2, default=str))
    config = _launch_config(
        LaunchConfig,
        min_nodes=rdzv.nnodes,
        max_nodes=rdzv.nnodes,
        nproc_per_node=nproc,
        run_id=rdzv.run_id or run.run_id,
        rdzv_backend=rdzv_backend,
        rdzv_endpoint=rdzv.endpoint,
        rdzv_configs={"join_timeout": rdzv.join_timeout_s, "timeout": rdzv.join_timeout_s, **rdzv_configs},
        max_restarts=0,
        monitor_interval=0.1,
        start_method="spawn",
        logs_specs=DefaultLogsSpecs(log_dir=str(run.path / "logs"), redirects=Std.ALL, tee=Std.NONE),
        shutdown_timeout=5,
    )
    from .procs import start_ticks

    marker_env = {RUN_ID_ENV: run.run_id, RUN_DIR_ENV: str(run.path), LAUNCHER_PID_ENV: str(os.getpid()),
                  LAUNCHER_START_ENV: str(start_ticks(os.getpid()) or ""), **socket_env}
    if nproc > 1 and "OMP_NUM_THREADS" not in os.environ:
        # What torchrun does: N ranks each spinning up all-core thread pools overload the host.
        marker_env["OMP_NUM_THREADS"] = "1"
    start = time.monotonic()
    with _environ(marker_env):  # spawned ranks inherit it at exec, so it shows in /proc/<pid>/environ
        try:
            values = elastic_launch(config, entrypoint)(job)
            return LaunchResult(run.run_id, str(run.path), True, time.monotonic() - start,
                                return_values={int(k): v for k, v in values.items()})
        except ChildFailedError as exc:
            return _failed_result(run, exc, time.monotonic() - start)
        except SignalException as exc:  # SIGINT/SIGTERM to the launcher: elastic stopped the ranks
            return LaunchResult(run.run_id, str(run.path), False, time.monotonic() - start,
                                launcher_error=f"interrupted: {exc}", interrupted=True)
        except Exception as exc:  # rendezvous or agent failure: still a report, never a traceback
            return LaunchResult(run.run_id, str(run.path), False, time.monotonic() - start,
                                launcher_error=f"{type(exc).__name__}: {exc}")


def _failed_result(run: RunDir, exc, duration_s: float) -> LaunchResult:
    failures = {}
    for rank, f in exc.failures.items():
        sig = None
        if f.exitcode is not None and f.exitcode < 0:
            try:
                sig = signal.Signals(-f.exitcode).name
            except ValueError:
                sig = f"signal {-f.exitcode}"
        failures[int(rank)] = RankFailure(
            rank=int(rank), local_rank=f.local_rank, pid=f.pid, exitcode=f.exitcode, signal=sig,
            message=_failure_text(f.message), timestamp=float(f.timestamp),
            log_tail=_log_tail(run, f.local_rank),
        )
    root_rank, _ = exc.get_first_failure()
    return LaunchResult(run.run_id, str(run.path), False, duration_s,
                        failures=failures, torchrun_root_cause_rank=int(root_rank))


def _failure_text(message) -> str:
    """Elastic's error-file message: a plain string, or {"message": ..., "extraInfo": {"py_callstack": ...}}."""
    if isinstance(message, dict):
        stack = (message.get("extraInfo") or {}).get("py_callstack") or ""
        return stack if stack else str(message.get("message", message))
    return str(message)


def _log_tail(run: RunDir, local_rank: int, max_chars: int = 2000) -> str:
    text = ""
    for path in run.log_files(local_rank):
        try:
            text += path.read_text(errors="replace")
        except OSError:
            continue
    return text[-max_chars:]


def _launch_config(cls, **kwargs):
    """LaunchConfig grew fields across torch releases; pass only those this torch has."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in kwargs.items() if k in names})


def _quiet_elastic_logging() -> None:
    # Elastic logs its agent's life and each rank's traceback; ddplab reports outcomes itself
    # (DDPLAB_DEBUG=1 shows elastic's own log).
    if not os.environ.get("DDPLAB_DEBUG"):
        for name in ("torch.distributed.elastic", "torch.distributed.launcher", "torch.multiprocessing"):
            logging.getLogger(name).setLevel(logging.CRITICAL)


class _environ:
    def __init__(self, values: dict[str, str]):
        self.values = values
        self.saved: dict[str, str | None] = {}

    def __enter__(self):
        for k, v in self.values.items():
            self.saved[k] = os.environ.get(k)
            os.environ[k] = v

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
