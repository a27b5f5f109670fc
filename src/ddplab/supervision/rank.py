"""A rank's life around its code, the same for a lab workload (job/worker.py) and a user's script (job/boot.py):
the parent-death guard, the rank's directory and pid file, faulthandler, the beacon, and, when the code fails,
its error recorded with its flight record and stacks before the rank leaves.

Workers must not outlive the launcher (plain torchrun leaves orphans holding device memory when its agent is
SIGKILLed): ``guard_parent`` runs first thing. What a rank starts itself is the launcher's to end (family.py),
and, if the launcher dies, its guardian's (guardian.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import json
import os
import signal
import sys
import threading
import time
import traceback
from typing import Mapping

from ..basics import redaction
from ..basics.files import write_text_atomic
from ..basics.rundir import LAUNCHER_PID_ENV, STATUS_STORE_ENV, RunDir
from .beacon import Beacon

_PR_SET_PDEATHSIG = 1
_PR_SET_PTRACER = 0x59616D61  # Yama's: who may read this process's memory besides its ancestors

# faulthandler's on-demand stack signal: a real-time one, since training stacks take the common ones (SIGUSR1/2
# for requeue, torchrun forwards TERM/INT/HUP/QUIT, profilers SIGPROF/SIGALRM), clear of the first real-time
# signals, which some C libraries take for themselves.
STACK_SIGNAL = signal.SIGRTMIN + 4


def guard_parent(launcher_pid: int, poll_s: float = 0.25) -> None:
    """Make sure this rank dies when the launcher dies, even by SIGKILL. PR_SET_PDEATHSIG is immediate but tied to
    the parent *thread*, so a watcher thread also polls the parent and the launcher."""
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)

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


def allow_stacks_from(launcher_pid: int) -> None:
    """Let the launcher and its children (py-spy, the ranks' sibling) read this rank's stacks where Yama restricts
    ptrace to ancestors (ptrace_scope=1, Ubuntu's default). A kernel without Yama refuses, and needs nothing."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PTRACER, launcher_pid, 0, 0, 0)


def ignore_sigint() -> None:
    """Ctrl+C is the launcher's to handle (it stops the ranks with SIGTERM): a rank taking it too would only add a
    traceback. Ranks start with SIGINT blocked; SIG_IGN discards one pending from start-up before the unblock."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


class RankLife:
    """One rank of a supervised job, as elastic's variables name it."""

    def __init__(self, run: RunDir, environ: Mapping[str, str] = os.environ):
        self.run = run
        self.environ = environ
        redaction.learn(environ=environ)  # the secrets it inherited: withheld from every file it writes
        self.rank = int(environ.get("RANK", "0"))
        self.local_rank = int(environ.get("LOCAL_RANK", self.rank))
        world = environ.get("WORLD_SIZE", "")
        self.world_size = int(world) if world.isdigit() else None
        self.beacon: Beacon | None = None
        self._fatal = None

    def arm(self, launcher_pid: int | None = None) -> "RankLife":
        """The guard first, then the rank's own directory and pid file (the sampler and the watcher find it by it)."""
        if launcher_pid is None:
            launcher_pid = int(self.environ[LAUNCHER_PID_ENV])
        guard_parent(launcher_pid)
        allow_stacks_from(launcher_pid)
        _quietly(lambda: self.run.rank_dir(self.rank).mkdir(parents=True, exist_ok=True))
        _quietly(lambda: write_text_atomic(self.run.pid_file(self.rank), f"{os.getpid()}\n", durable=False))
        return self

    def catch_fatal_signals(self) -> None:
        """faulthandler writes every thread's stack to fatal.txt on a fatal signal and on STACK_SIGNAL."""
        try:
            self._fatal = open(self.run.fatal_file(self.rank), "w")  # kept open: faulthandler writes to its fd
        except OSError:
            return  # no file, no stacks on a fatal signal: the job goes on
        faulthandler.enable(self._fatal, all_threads=True)
        faulthandler.register(STACK_SIGNAL, file=self._fatal, all_threads=True)

    def start_beacon(self, phase: str = "before-init", recorder_setting: str | None = None) -> Beacon:
        from ..cluster.exposure import NODE_ADDRESS_ENV

        group_rank = self.environ.get("GROUP_RANK", "")
        self.beacon = Beacon(self.run, self.rank, self.local_rank, world_size=self.world_size,
                             node_rank=int(group_rank) if group_rank.isdigit() else None,
                             address=self.environ.get(NODE_ADDRESS_ENV), publisher=self._publisher(),
                             stack_signal=int(STACK_SIGNAL) if self._fatal else None,
                             recorder_setting=recorder_setting, phase=phase).start()
        return self.beacon

    def record_error(self, exc: BaseException, text: str, exit_code: int | None) -> None:
        """The rank's error for the judge: error.json, its status "failed", its flight record and stacks; the
        program's words withheld (a token quoted in its error message is not copied)."""
        from ..records.codec import to_json
        from ..records.supervision import RankError

        text = redaction.redact_text(text)
        error = RankError(rank=self.rank, type=type(exc).__name__, message=redaction.redact_text(str(exc)),
                          traceback=text, at=time.time())
        _quietly(lambda: write_text_atomic(self.run.error_file(self.rank), json.dumps(to_json(error)),
                                           durable=False))
        if self.beacon is not None:
            self.beacon.dump(None, note=f"The rank's code raised; its traceback:\n{text}")
            self.beacon.fail(f"{type(exc).__name__}: {error.message}"[-2000:], exit_code, exc)

    def _publisher(self):
        """A publisher to the job's store, or None: one machine, or a store it cannot reach (said on stderr)."""
        address = self.environ.get(STATUS_STORE_ENV)
        if not address:
            return None
        from ..basics.validators import split_endpoint
        from ..cluster.status_store import StatusPublisher, open_store

        restart = self.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        try:
            store = open_store(*split_endpoint(address))
        except Exception as exc:  # noqa: BLE001 - any failure to connect leaves the files as the only status
            print(f"ddplab: rank {self.rank} cannot publish its status to the job's store at {address}: {exc}",
                  file=sys.stderr)
            return None
        return StatusPublisher(store, self.rank, job=self.environ.get("TORCHELASTIC_RUN_ID", ""),
                               restart_count=int(restart) if restart.isdigit() else 0)


def error_text(exc: BaseException, skip_files: tuple[str, ...] = ()) -> str:
    """The traceback Python would print, without the frames of files in ``skip_files`` at its top."""
    tb = exc.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename.startswith(skip_files)
                              or tb.tb_frame.f_code.co_filename == "<frozen runpy>"
                              or tb.tb_frame.f_code.co_filename.endswith(os.sep + "runpy.py")):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


def _quietly(write) -> None:
    """ddplab's bookkeeping inside a rank never fails the rank: a full disk costs supervision only."""
    try:
        write()
    except Exception as exc:  # noqa: BLE001
        print(f"ddplab: could not write a supervision file ({exc}); the job goes on", file=sys.stderr, flush=True)
