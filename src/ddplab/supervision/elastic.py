"""One call into torch.distributed.elastic (torchrun's engine, used as a library) for every job: a lab workload
(a function run in each rank) or a user's script (a program run through job/boot.py).

SIGINT, SIGTERM and SIGHUP are ddplab's during a launch too: elastic handles only SIGQUIT, a stop signal is raised
as elastic's own SignalException so that elastic tears the ranks down, and elastic's handlers are put back
afterwards. Ranks start with SIGINT blocked (Ctrl+C reaches the whole process group; the launcher decides).
A stop reaches a launch still waiting for other machines too (machine_waits.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import psutil

from ..basics import interrupts
from ..basics.env_vars import environ_set
from ..basics.files import raise_if_full
from ..basics.rundir import RunDir
from .exits import signal_name
from .reaping import run_processes, terminate_then_kill
from .machine_waits import waits_in_a_thread

# Elastic keeps this one; the stop signals are ddplab's (see the module docstring).
ELASTIC_SIGNALS = "SIGQUIT"
ELASTIC_SIGNALS_ENV = "TORCHELASTIC_SIGNALS_TO_HANDLE"  # launch_agent sets it for the process: restored after


@dataclass(frozen=True)
class ElasticFailure:
    """How torch's elastic launcher saw one rank fail (its ProcessFailure, as plain values)."""

    local_rank: int
    pid: int
    exitcode: int | None
    signal: str | None  # SIGKILL, SIGABRT ... when a signal ended it
    message: str  # the rank's own exception text, from its elastic error file
    timestamp: float  # elastic's: the error file's time, else its poll's (whole seconds)
    log_tail: str = ""

    @property
    def ended_by(self) -> str:
        return self.signal or f"exit {self.exitcode}"


@dataclass
class ElasticOutcome:
    ok: bool
    duration_s: float
    return_values: dict[int, Any] = field(default_factory=dict)  # global rank -> what it returned
    failures: dict[int, ElasticFailure] = field(default_factory=dict)
    torchrun_root_cause_rank: int | None = None  # the rank elastic would blame (its first failure)
    launcher_error: str | None = None
    interrupted: bool = False  # the launcher itself got SIGINT/SIGTERM


def launch_config(**kwargs):
    """torch's LaunchConfig with the fields this torch has (they grew across releases)."""
    from torch.distributed.launcher.api import LaunchConfig

    names = {f.name for f in dataclasses.fields(LaunchConfig)}
    return LaunchConfig(**{k: v for k, v in kwargs.items() if k in names})


def run(config, entrypoint, args: tuple, run_dir: RunDir, env: dict[str, str]) -> ElasticOutcome:
    """``entrypoint(*args)`` (a function, or a program) in every rank under ``config``, the ranks inheriting ``env``."""
    from torch.distributed.elastic.multiprocessing import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import elastic_launch

    _quiet_elastic_logging()
    if "signals_to_handle" in {f.name for f in dataclasses.fields(config)}:  # SIGQUIT: module docstring
        config = dataclasses.replace(config, signals_to_handle=ELASTIC_SIGNALS)

    def stop_ranks(name: str) -> BaseException:
        # Elastic's own signal exception: its agent stops the ranks with ``sigval``. SIGTERM, not the SIGINT
        # received: ranks ignore SIGINT.
        return SignalException(f"{name} to the launcher", sigval=signal.SIGTERM)

    start = time.monotonic()
    # environ_set: the ranks inherit ``env`` at exec, so it shows in /proc/<pid>/environ. handlers_restored:
    # elastic never removes its handlers, which would turn the next Ctrl+C into a SignalException after the launch.
    with environ_set({**env, ELASTIC_SIGNALS_ENV: ELASTIC_SIGNALS}), \
            interrupts.handlers_restored((signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)), \
            waits_in_a_thread():
        try:
            # raising first: it raises at once if a stop came before the launch, and a SIGINT held back by the blocked
            # mask reaches it when the mask is restored, still inside the launch (a second signal there is absorbed)
            with interrupts.raising(stop_ranks), _ranks_start_with_sigint_blocked(), _stop_signals_stay_ours():
                values = elastic_launch(config, entrypoint)(*args)
            return ElasticOutcome(True, time.monotonic() - start,
                                  return_values={int(k): v for k, v in (values or {}).items()})
        except ChildFailedError as exc:
            _raise_if_disk_full(run_dir)
            return ElasticOutcome(False, time.monotonic() - start, failures=_failures(run_dir, exc),
                                  torchrun_root_cause_rank=int(exc.get_first_failure()[0]))
        except SignalException as exc:  # a stop signal to the launcher: elastic stopped the ranks
            _end_unregistered_ranks(run_dir)
            return ElasticOutcome(False, time.monotonic() - start, launcher_error=f"interrupted: {exc}",
                                  interrupted=True)
        except Exception as exc:  # rendezvous or agent failure: still a report, never a traceback
            _end_unregistered_ranks(run_dir)
            _raise_if_disk_full(run_dir)
            return ElasticOutcome(False, time.monotonic() - start, launcher_error=f"{type(exc).__name__}: {exc}")


def _failures(run_dir: RunDir, exc) -> dict[int, ElasticFailure]:
    failures = {}
    for rank, f in exc.failures.items():
        sig = signal_name(-f.exitcode) if f.exitcode is not None and f.exitcode < 0 else None
        failures[int(rank)] = ElasticFailure(local_rank=f.local_rank, pid=f.pid, exitcode=f.exitcode, signal=sig,
                                             message=_failure_text(f.message), timestamp=float(f.timestamp),
                                             log_tail=_log_tail(run_dir, f.local_rank))
    return failures


def _failure_text(message) -> str:
    """Elastic's error-file message: a plain string, or {"message": ..., "extraInfo": {"py_callstack": ...}}."""
    if isinstance(message, dict):
        stack = (message.get("extraInfo") or {}).get("py_callstack") or ""
        return stack if stack else str(message.get("message", message))
    return str(message)


def _log_tail(run_dir: RunDir, local_rank: int, max_chars: int = 2000) -> str:
    text = ""
    for path in run_dir.log_files(local_rank):
        try:
            text += path.read_text(errors="replace")
        except OSError:
            continue
    return text[-max_chars:]


def _end_unregistered_ranks(run_dir: RunDir, grace_s: float = 3.0) -> None:
    """End ranks elastic started but never registered (a stop during its start loop), and so never tears down:
    children of this launcher carrying this run's id, other than multiprocessing's resource tracker."""
    ours = set(run_processes(run_dir.run_id))
    # SIGTERM, as elastic's teardown: quiet, nothing handles it while starting
    terminate_then_kill([c for c in psutil.Process().children() if c.pid in ours], grace_s)


def _raise_if_disk_full(run_dir: RunDir) -> None:
    """Name a full disk (exit 3): elastic fails on the empty error file of a rank that hit ENOSPC (JSONDecodeError)."""
    raise_if_full(run_dir.path, "the run directory: ranks' pid, status, log and error files")


@contextlib.contextmanager
def _stop_signals_stay_ours():
    """Elastic's handler, for a stop signal that had one of ddplab's, hands the signal to ddplab's. Torch before 2.10
    has no LaunchConfig.signals_to_handle: it installs its handler for SIGINT, SIGTERM, SIGHUP and SIGQUIT when the
    ranks start, and stops them with the signal it got. The ranks ignore SIGINT, so a Ctrl+C took elastic's 30 s
    grace and then SIGKILL. Elastic installs its handler by name when it starts the ranks, so that name is what
    changes, for the launch only."""
    from torch.distributed.elastic.multiprocessing import api

    elastics = getattr(api, "_terminate_process_handler", None)
    ours = {s: h for s in interrupts.STOP_SIGNALS if callable(h := signal.getsignal(s))}
    if elastics is None or not ours:
        yield
        return

    def handler(signum, frame):
        return ours.get(signum, elastics)(signum, frame)

    api._terminate_process_handler = handler
    try:
        yield
    finally:
        api._terminate_process_handler = elastics


@contextlib.contextmanager
def _ranks_start_with_sigint_blocked():
    """Ranks start with SIGINT blocked (a child inherits its starting thread's mask through exec), so a Ctrl+C
    while they import torch stays pending until the rank ignores SIGINT. A helper thread keeps SIGINT deliverable
    to this process meanwhile (Python runs the handler in the main thread whichever thread got it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # multiprocessing starts its resource tracker at first use (inside elastic) and unblocks SIGINT in the calling
    # thread afterwards, whatever was blocked before: start it now.
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    done = threading.Event()
    threading.Thread(target=done.wait, name="ddplab-sigint-receiver", daemon=True).start()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        done.set()  # first: a SIGINT held back is handled (and may raise) when the mask is restored
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _quiet_elastic_logging() -> None:
    # Elastic logs its agent's life and each rank's traceback; ddplab reports outcomes itself (DDPLAB_DEBUG=1: shown).
    if not os.environ.get("DDPLAB_DEBUG"):
        for name in ("torch.distributed.elastic", "torch.distributed.launcher", "torch.multiprocessing"):
            logger = logging.getLogger(name)
            logger.setLevel(logging.CRITICAL)
            # Elastic's module loggers set their own level, so the parent's does not hold them: stop them here.
            if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
                logger.addHandler(logging.NullHandler())
            logger.propagate = False
