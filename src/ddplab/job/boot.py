"""What each rank of `ddplab launch` runs before the user's code.

    python -u -m ddplab.job.boot script.py args...      as `python -u script.py args...`
    python -u -m ddplab.job.boot -m module args...      as `python -u -m module args...`
    python -u -m ddplab.job.boot --no-python cmd args   arms the guard, then execs cmd

In order: arm the parent-death guard; switch the flight recorder on unless the user set it; arm faulthandler;
start the beacon; then run the user's code with ``sys.argv``, ``sys.path[0]`` and ``__main__`` as python itself
sets them (runpy.run_path would not). When the code raises, the rank prints the traceback as python would,
records it, asks its peers (who wait on it) for their records, and leaves through ``os._exit``: interpreter
shutdown could hang in destroy_process_group and hide its error.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import io
import json
import os
import runpy
import signal
import sys
import time
import types
from importlib import metadata

from .config import Target
from ..platform import flight_recorder
from ..basics.proc_stat import alive
from ..basics import redaction
from ..basics.files import write_text_atomic
from ..basics.redaction import redact_argv
from ..basics.rundir import RunDir
from ..supervision.arrivals import ARRIVALS_ENV
from ..supervision.rank import RankLife, error_text
from ..supervision.states import END_PHASES, is_waiting, read_states
from ..supervision.watcher import request_dumps

# How long a failing rank waits for its peers to block on it (it returns as soon as they do): on a loaded machine
# a peer still computing is dumped before it reaches the collective it would wait in.
PEER_SETTLE_S = 5.0
PEER_DUMP_WAIT_S = 3.0  # then, how long it waits for their records before leaving


def torch_version() -> tuple[int, int]:
    """torch's release without importing torch (the user's code will, when it wants to)."""
    try:
        major, minor = metadata.version("torch").split(".")[:2]
        return int(major), int(minor)
    except (metadata.PackageNotFoundError, ValueError):
        return (0, 0)


def switch_on_flight_recorder(run: RunDir) -> str:
    """Set the recorder's environment before torch reads it; says what was decided."""
    user = flight_recorder.user_buffer_setting(os.environ)
    os.environ.update(flight_recorder.recorder_environment(os.environ, run.torch_dump_prefix, torch_version()))
    if os.environ.get(ARRIVALS_ENV):  # the straggler watch compares device times where the recorder keeps them
        os.environ.update(flight_recorder.timing_environment(os.environ))
    if user:
        return f"set by the user ({user})"
    return f"switched on by ddplab ({flight_recorder.DEFAULT_BUFFER_ENTRIES} entries)"


def run_script(path: str, args: tuple[str, ...]) -> None:
    """Run a file as `python path args` does: a fresh __main__, argv as typed, sys.path[0] its real directory."""
    if not os.path.isfile(path):  # a directory or zip with __main__.py: runpy sets sys.path itself
        sys.argv = [path, *args]
        runpy.run_path(path, run_name="__main__")
        return
    full = path if os.path.isabs(path) else os.path.join(os.getcwd(), path)  # python does not normalise it
    main = types.ModuleType("__main__")  # __spec__ and __package__ None, as python's own __main__ has them
    main.__file__ = full
    main.__cached__ = None
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", full)
    main.__builtins__ = __builtins__
    with io.open_code(full) as f:
        code = compile(f.read(), full, "exec")
    sys.argv = [path, *args]
    sys.path[0] = os.path.dirname(os.path.realpath(full))
    sys.modules["__main__"] = main
    exec(code, main.__dict__)


def run_module(name: str, args: tuple[str, ...]) -> None:
    """Run a module as `python -m name args` does: sys.path[0] the working directory, a fresh __main__."""
    sys.argv = [name, *args]
    sys.path[0] = os.getcwd()
    runpy.run_module(name, run_name="__main__", alter_sys=True)


def user_traceback(exc: BaseException) -> str:
    """The traceback python would print for the user's program: without the boot frames."""
    return error_text(exc, skip_files=(os.path.dirname(os.path.abspath(__file__)) + os.sep,))


def exit_status(exc: SystemExit) -> int:
    """The process exit status python gives a SystemExit (printing a non-integer code)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


class Rank(RankLife):
    """One rank's life around the user's code (supervision/rank.py's RankLife, plus what a script needs)."""

    def __init__(self, run: RunDir):
        super().__init__(run)
        # This module runs as __main__ and the user's code replaces it there: keep it referenced.
        self._boot_module = sys.modules.get(__name__)

    def exec_command(self, target: Target) -> None:
        """--no-python: nothing of ours survives exec but the guard's PR_SET_PDEATHSIG."""
        beacon = self.start_beacon(phase="exec")
        beacon.phase("exec", command=[target.name, *redact_argv(list(target.args))])  # a status file is shown
        beacon.close()
        try:
            os.execvp(target.name, [target.name, *target.args])
        except OSError as exc:
            self.record_error(exc, user_traceback(exc), 127)
            os._exit(127)

    def run_target(self, target: Target) -> None:
        recorder = switch_on_flight_recorder(self.run)
        self.catch_fatal_signals()
        self.start_beacon(phase="running", recorder_setting=recorder)
        try:
            if target.kind == "module":
                run_module(target.name, target.args)
            else:
                run_script(target.name, target.args)
        except SystemExit as exc:
            status = exit_status(exc)
            if status == 0:
                self._finished()
                raise
            self.fail(exc, status)
        except KeyboardInterrupt as exc:  # Ctrl+C reaches every rank: no peer to wait for
            self.fail(exc, 130, ask_peers=False)
        except BaseException as exc:
            self.fail(exc, 1)
        self._finished()

    def _finished(self) -> None:
        """The script ended well: its last status, then no beacon thread during the interpreter's shutdown (one
        answering a dump request there kept a finished rank from exiting)."""
        self.beacon.phase("finished", exit_code=0)
        self.beacon.close()

    def fail(self, exc: BaseException, status: int, ask_peers: bool = True) -> None:
        # The launcher may already be stopping the group: its SIGTERM waits until the evidence is written, and the
        # rank leaves right after.
        signal.signal(signal.SIGTERM, lambda signum, frame: None)
        text = user_traceback(exc)
        if not isinstance(exc, SystemExit):
            sys.stderr.write(text)
        self.record_error(exc, text, status)
        if ask_peers:
            self._collect_peer_evidence(f"rank {self.rank} raised {type(exc).__name__}")
        self._tell_elastic(exc)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)

    def _tell_elastic(self, exc: BaseException) -> None:
        """Elastic's error file too, so torchrun-style summaries show the real traceback, written by torch's
        handler, then rewritten with the program's words withheld."""
        path = os.environ.get("TORCHELASTIC_ERROR_FILE")
        if path and "torch" in sys.modules:
            with contextlib.suppress(Exception):
                from torch.distributed.elastic.multiprocessing.errors import ErrorHandler

                ErrorHandler().record_exception(exc)
                with open(path) as f:
                    record = json.load(f)
                write_text_atomic(path, json.dumps(redaction.redact_json(record)), durable=False)

    def _collect_peer_evidence(self, reason: str) -> None:
        """Ask every rank for its record and stacks and wait briefly for the ones still running (they wait on this
        rank), first letting them reach the collective they will wait in, so that their records show it."""
        failed_at = time.time()  # settled: a heartbeat written after the failure shows the peer waiting on others
        self._wait_until(lambda: all(s.heartbeat > failed_at and is_waiting(s) for s in self._running_peers().values()),
                         PEER_SETTLE_S)
        requested_at = time.time()
        try:
            request_id = request_dumps(self.run, reason, by=f"rank {self.rank}")
        except Exception:  # noqa: BLE001 - no room to ask: the job goes on without the peers' records
            return
        self.beacon.mark_answered(request_id)
        self._wait_until(lambda: all(self._answered_since(peer, requested_at) for peer in self._running_peers()),
                         PEER_DUMP_WAIT_S)

    @staticmethod
    def _wait_until(condition, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not condition():
            time.sleep(0.05)

    def _running_peers(self) -> dict:
        return {rank: state for rank, state in read_states(self.run).items()
                if rank != self.rank and state.phase not in END_PHASES and alive(state.pid)}

    def _answered_since(self, rank: int, when: float) -> bool:
        try:
            return self.run.answered_file(rank).stat().st_mtime >= when
        except OSError:
            return False


def main(argv: list[str] | None = None) -> None:
    target = Target.from_boot_argv(sys.argv[1:] if argv is None else argv)
    redaction.learn(target.args)  # before the program can change its arguments; Rank learns the environment
    rank = Rank(RunDir.from_environ())
    rank.arm()
    if target.kind == "command":
        rank.exec_command(target)
    rank.run_target(target)


if __name__ == "__main__":
    main()
