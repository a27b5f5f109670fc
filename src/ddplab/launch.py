"""Start ranks through torch.distributed.elastic (torchrun's engine, used as a library).

One run = one run directory (rundir.py owns its layout and the variables ranks carry; listen.json there says
where the rendezvous store listens, written before the ranks start, so a supervisor can read the job's store).

A launch on one machine listens on loopback only: ``one_machine_rendezvous`` is the one place that binds the
store's socket and names the rendezvous for it, for the lab's runs and for `ddplab launch` (job/supervise.py).

Workers must not outlive the launcher (plain torchrun leaves orphans holding device
memory when its agent is SIGKILLed, docs/background.md §3). Elastic cannot guarantee that, so
every rank arms a parent-death guard first thing (``worker.guard_parent``). This
module knows nothing about what the ranks compute.

SIGINT and SIGTERM are ddplab's (interrupts.py), during a launch too: elastic is asked to
handle only SIGHUP and SIGQUIT, a stop signal is raised as elastic's own SignalException so
that elastic tears the ranks down with SIGTERM, and every handler elastic installed is put
back afterwards.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import psutil

from . import interrupts
from .env_vars import environ_set
from .exposure import Exposure, where_to_listen
from .files import raise_if_full, write_text_atomic
from .records.listen import Listened
from .records.session import RankReturn
from .rundir import RUN_ID_ENV, RunDir

# Elastic keeps these; SIGINT/SIGTERM are ddplab's (see the module docstring).
ELASTIC_SIGNALS = "SIGHUP,SIGQUIT"
ELASTIC_SIGNALS_ENV = "TORCHELASTIC_SIGNALS_TO_HANDLE"  # launch_agent sets it for the process: restored after
# A job across machines that failed: how long the other machines may still report their ranks' end
# through the job's store (their ranks fail within moments of a peer's failure).
LAST_WORDS_S = 2.0


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
    return_values: dict[int, RankReturn] = field(default_factory=dict)  # global rank -> what it returned
    failures: dict[int, RankFailure] = field(default_factory=dict)
    torchrun_root_cause_rank: int | None = None  # the rank elastic would blame (first to fail)
    launcher_error: str | None = None
    interrupted: bool = False  # the launcher itself got SIGINT/SIGTERM
    listen: Listened | None = None  # where the store and the ranks' sockets listened (exposure.py)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Rendezvous:
    nnodes: int = 1
    endpoint: str = "127.0.0.1:0"  # one machine: the loopback store (rendezvous.py) on a free port
    join_timeout_s: float = 120.0
    host: str = "auto"  # several machines: host the store here? auto (the endpoint is one of our addresses), yes, no
    store_wait_s: float | None = None  # several machines: how long to wait for the store to answer; None: join timeout
    job_id: str | None = None  # several machines: the job's name (--rdzv-id); None: the endpoint's

    @classmethod
    def from_options(cls, opts) -> "Rendezvous":
        """The rendezvous a command's LaunchOptions ask for (--nnodes, --rdzv-endpoint, --rdzv-host, --rdzv-id)."""
        return cls(nnodes=opts.nnodes, endpoint=opts.rdzv_endpoint or cls.endpoint, host=opts.rdzv_host,
                   job_id=opts.rdzv_id)

    @property
    def run_id(self) -> str | None:
        """Every machine of a job must name the same rendezvous; one machine uses its own run id."""
        return f"ddplab-{self.job_id or self.endpoint}" if self.nnodes > 1 else None


def launch(entrypoint, job, nproc: int, run: RunDir, rdzv: Rendezvous = Rendezvous()) -> LaunchResult:
    """Run ``entrypoint(job)`` (a worker.RankJob) in ``nproc`` ranks and gather what each returns.

    On one machine the rendezvous store listens on a socket bound to loopback here, and the
    ranks' collective sockets are pinned to the loopback interface (exposure.py). Across machines
    the store listens on the endpoint's address only, on the machine that holds it, and the
    collectives are pinned to the interface that routes to the endpoint (cluster/endpoint.py).
    """
    exposure = where_to_listen(rdzv.nnodes, rdzv.endpoint, job.placement.device_type, rdzv_host=rdzv.host)
    if exposure.across is not None:
        return _launch_across_machines(entrypoint, job, nproc, run, rdzv, exposure)
    try:
        with one_machine_rendezvous(exposure, otherwise="c10d") as meeting:
            exposure = meeting.exposure
            result = _launch(entrypoint, job, nproc, run, rdzv, meeting.backend, meeting.configs, exposure)
    except CannotListen as exc:
        return LaunchResult(run.run_id, str(run.path), False, 0.0, listen=exposure.record(),
                            launcher_error=str(exc))
    result.listen = exposure.record()
    return result


class CannotListen(Exception):
    """The loopback socket for a one-machine rendezvous could not be bound (the port asked for is taken)."""


@dataclass(frozen=True)
class OneMachineMeeting:
    """How elastic's agent meets its ranks on one machine: the rendezvous backend to name, what to add to
    its configuration, and where the run listens (with the port the store got)."""

    backend: str
    configs: dict
    exposure: Exposure


@contextlib.contextmanager
def one_machine_rendezvous(exposure: Exposure, otherwise: str) -> Iterator[OneMachineMeeting]:
    """The one place a launcher on one machine keeps its rendezvous off the network (`ddplab train`'s
    launch() and `ddplab launch`'s job/supervise.py both meet through it; docs/exposure.md).

    When this torch has the parts (``exposure.loopback_store``), a socket bound to 127.0.0.1 here, for as
    long as the block runs, served by the ddplab-loopback handler (rendezvous.py); otherwise the backend
    ``otherwise``, whose store listens on every interface, as ``exposure`` already says.
    ``CannotListen`` when the socket cannot be bound, before anything starts.
    """
    if not exposure.loopback_store:
        yield OneMachineMeeting(otherwise, {}, exposure)
        return
    from . import rendezvous

    try:
        listener = rendezvous.bind_loopback(exposure.store_port)
    except OSError as exc:
        raise CannotListen(f"cannot listen on {exposure.store}: {exc}") from exc
    with listener:  # the store serves on a duplicate of it; this copy is closed when the block ends
        yield OneMachineMeeting(rendezvous.register(), {rendezvous.LISTEN_FD_KEY: listener.fileno()},
                                exposure.listening_at(listener.getsockname()[1]))


def _launch_across_machines(entrypoint, job, nproc: int, run: RunDir, rdzv: Rendezvous,
                            exposure: Exposure) -> LaunchResult:
    """Host the store or reach it (exit 3 when nothing answers), then launch through ddplab-c10d."""
    from . import rendezvous
    from .cluster.endpoint import StoreWaitStopped

    try:
        with rendezvous.meet(exposure.across, rdzv.store_wait_s or rdzv.join_timeout_s, session=rdzv.run_id) as meeting:
            exposure = exposure.meeting_through(meeting.store)
            result = _launch(entrypoint, job, nproc, run, rdzv, rendezvous.register_across_machines(),
                             meeting.rdzv_configs, exposure, local_addr=meeting.store.node_address)
            if not result.ok:
                _wait_for_last_words()
    except StoreWaitStopped as exc:  # nothing started: a report that says so
        result = LaunchResult(run.run_id, str(run.path), False, 0.0, launcher_error=f"interrupted: {exc}",
                              interrupted=True)
    result.listen = exposure.record()
    return result


def _wait_for_last_words(wait_s: float = LAST_WORDS_S) -> None:
    """A job across machines failed here: give the other machines' ranks a moment to report how they ended
    through the job's store (kept serving meanwhile where this machine hosts it), so that every machine's
    supervisor tells a machine that failed from one that vanished (status.silent_machines). A stop request
    cuts it short."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and not interrupts.requested():
        time.sleep(0.1)


def _launch(entrypoint, job, nproc: int, run: RunDir, rdzv: Rendezvous, rdzv_backend: str,
            rdzv_configs: dict, exposure: Exposure, local_addr: str | None = None) -> LaunchResult:
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, SignalException, Std
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    _quiet_elastic_logging()
    write_text_atomic(run.job_file, json.dumps(job.describe(), indent=2))
    write_text_atomic(run.listen_file, json.dumps(exposure.to_dict(), indent=2))
    config = _launch_config(
        LaunchConfig,
        min_nodes=rdzv.nnodes,
        max_nodes=rdzv.nnodes,
        nproc_per_node=nproc,
        run_id=rdzv.run_id or run.run_id,
        rdzv_backend=rdzv_backend,
        rdzv_endpoint=rdzv.endpoint,
        rdzv_configs={"join_timeout": rdzv.join_timeout_s, "timeout": rdzv.join_timeout_s, **rdzv_configs},
        local_addr=local_addr,  # how the rendezvous names this machine (torch: its fully qualified hostname)
        max_restarts=0,
        monitor_interval=0.1,
        start_method="spawn",
        logs_specs=DefaultLogsSpecs(log_dir=str(run.logs_dir), redirects=Std.ALL, tee=Std.NONE),
        shutdown_timeout=5,
        signals_to_handle=ELASTIC_SIGNALS,
    )
    from .procs import start_ticks

    marker_env = {**run.marker_env(os.getpid(), start_ticks(os.getpid())), **exposure.environment()}
    if nproc > 1 and "OMP_NUM_THREADS" not in os.environ:
        # What torchrun does: N ranks each spinning up all-core thread pools overload the host.
        marker_env["OMP_NUM_THREADS"] = "1"

    def stop_ranks(name: str) -> BaseException:
        # Elastic's own signal exception: its agent stops the ranks with ``sigval``. SIGTERM, not the
        # SIGINT received: ranks ignore SIGINT (worker.py).
        return SignalException(f"{name} to the launcher", sigval=signal.SIGTERM)

    start = time.monotonic()
    # _environ: spawned ranks inherit marker_env at exec, so it shows in /proc/<pid>/environ.
    # handlers_restored: elastic installs handlers when it starts the ranks and never removes them;
    # left in place, they turned the next Ctrl+C into a SignalException inside whatever ran after
    # the launch (a drill's `except Exception` swallowed it).
    with _ranks_start_with_sigint_blocked(), environ_set({**marker_env, ELASTIC_SIGNALS_ENV: ELASTIC_SIGNALS}), \
            interrupts.handlers_restored((signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)):
        try:
            with interrupts.raising(stop_ranks):  # raises at once if a stop came before the launch
                values = elastic_launch(config, entrypoint)(job)
            return LaunchResult(run.run_id, str(run.path), True, time.monotonic() - start,
                                return_values={int(k): v for k, v in values.items()})
        except ChildFailedError as exc:
            _raise_if_disk_full(run)
            return _failed_result(run, exc, time.monotonic() - start)
        except SignalException as exc:  # SIGINT/SIGTERM to the launcher: elastic stopped the ranks
            _end_unregistered_ranks(run)
            return LaunchResult(run.run_id, str(run.path), False, time.monotonic() - start,
                                launcher_error=f"interrupted: {exc}", interrupted=True)
        except Exception as exc:  # rendezvous or agent failure: still a report, never a traceback
            _end_unregistered_ranks(run)
            _raise_if_disk_full(run)
            return LaunchResult(run.run_id, str(run.path), False, time.monotonic() - start,
                                launcher_error=f"{type(exc).__name__}: {exc}")


def _end_unregistered_ranks(run: RunDir, grace_s: float = 3.0) -> None:
    """End ranks elastic started but never registered, and so never tears down.

    A stop that lands while elastic is still starting the ranks aborts its start loop: the ranks
    already started are left out of its process context. Still importing torch, they would fail
    later on the launcher's vanished pipes and semaphores (a traceback each) or wait for peers.
    Evidence they are ours: children of this launcher, started by multiprocessing's spawn, that
    carry this run's id.
    """
    ranks = []
    for child in psutil.Process().children():
        try:
            if child.environ().get(RUN_ID_ENV) == run.run_id and "spawn_main" in " ".join(child.cmdline()):
                ranks.append(child)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    for rank in ranks:
        rank.terminate()  # SIGTERM, as elastic's teardown: quiet, nothing handles it while starting
    _, alive = psutil.wait_procs(ranks, timeout=grace_s)
    for rank in alive:
        rank.kill()
    psutil.wait_procs(alive, timeout=grace_s)


def _raise_if_disk_full(run: RunDir) -> None:
    """A rank that hits ENOSPC cannot write its error file either, and elastic then fails on the
    empty file with a JSONDecodeError: name the full disk instead (exit 3)."""
    raise_if_full(run.path, "the run directory: ranks' pid, status, log and error files")


@contextlib.contextmanager
def _ranks_start_with_sigint_blocked():
    """Ranks start with SIGINT blocked, so a Ctrl+C that reaches them while they still import torch
    (a terminal signals the whole foreground process group) stays pending until the rank ignores
    SIGINT (worker.py), instead of printing one KeyboardInterrupt traceback per rank.

    A child inherits the signal mask of the thread that starts it, through exec. Meanwhile a
    helper thread keeps SIGINT deliverable to this process: Python runs the handler in the main
    thread whichever thread the kernel handed the signal to.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # multiprocessing starts its resource tracker at first use (inside elastic) and unblocks SIGINT
    # in the calling thread afterwards, whatever was blocked before: start it now.
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    done = threading.Event()
    threading.Thread(target=done.wait, name="ddplab-sigint-receiver", daemon=True).start()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        done.set()


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
            logger = logging.getLogger(name)
            logger.setLevel(logging.CRITICAL)
            # Elastic's module loggers set their own level (WARNING), so the parent's level does not
            # hold them (a JSONDecodeError traceback hid a full disk): stop their records here.
            if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
                logger.addHandler(logging.NullHandler())
            logger.propagate = False
