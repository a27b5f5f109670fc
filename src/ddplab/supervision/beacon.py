"""Each rank's beacon, for every kind of job: its status (``RankState``), where the launcher's watcher reads it.

It writes the status file atomically at every phase change, and a side thread rewrites it every ``HEARTBEAT_S``
with where the main thread is, the flight recorder's per-group progress (what a user's script gives without
knowing it) and a lab workload's own collective counts. Every ``TICK_S`` the thread also answers a dump request
with the rank's flight record and every thread's stack.

A thread, not a signal handler: a Python handler runs only when the main thread returns to the interpreter, which
it may never do inside a collective; the thread runs whenever the GIL is released. When something holds the GIL,
faulthandler's signal (rank.py) is the way in. Across machines the record also goes to the job's store at every
phase change and heartbeat (entering and leaving a collective stay local: the hot path).

A write that fails is noted once on stderr and the job goes on: supervision is degraded, never the rank.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
import traceback
from dataclasses import replace

from ..basics.files import write_text_atomic
from ..basics.redaction import redact_text
from ..basics.proc_stat import start_ticks
from ..platform import flight_recorder
from ..records.codec import to_json
from ..records.supervision import GroupProgress, RankState, Where
from ..basics.rundir import RunDir
from . import arrivals
from .evidence import requested

HEARTBEAT_S = 0.5
TICK_S = 0.1
MAX_FRAMES = 8
IMPORTLIB = "<frozen importlib._bootstrap"  # the import system's frames (and _bootstrap_external's)

_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # the ddplab package


def _is_machinery(filename: str) -> bool:
    """Frames between the interpreter and the user's code (boot, runpy): left out of "where"."""
    return (filename.startswith(_OURS + "supervision" + os.sep) or filename.startswith(_OURS + "job" + os.sep)
            or filename == "<frozen runpy>" or filename.endswith(os.sep + "runpy.py"))


def in_distributed_api(filename: str, distributed_dir: str | None) -> bool:
    """A frame of torch.distributed's API, not elastic's (its ``_wrap`` wraps a function entrypoint's whole run)."""
    return bool(distributed_dir) and filename.startswith(distributed_dir) \
        and not filename.startswith(distributed_dir + "elastic" + os.sep)


def _names_the_call(code) -> bool:
    """A frame under torch.distributed that names the call the user made: not the logging decorator's wrapper, and
    not a module's own code running while it is imported."""
    return not code.co_filename.endswith("c10d_logger.py") and code.co_name != "<module>"


def progress_of(record: dict | None) -> dict[str, GroupProgress] | None:
    """The per-group status of a flight record as integers (JSON dumps carry strings); -1 means none yet."""
    if not record or not record.get("pg_status"):
        return None
    return {str(pg): GroupProgress(int(s.get("last_enqueued_collective", -1)),
                                   int(s.get("last_started_collective", -1)),
                                   int(s.get("last_completed_collective", -1)))
            for pg, s in record["pg_status"].items()}


def torch_distributed_dir() -> str | None:
    module = sys.modules.get("torch.distributed")
    path = getattr(module, "__file__", None)
    return os.path.dirname(path) + os.sep if path else None


def locate(frame, distributed_dir: str | None) -> Where:
    """Where a thread is: the outermost torch.distributed call it is inside (the one the user made), the user's line
    that called it, the innermost frames, and whether it is inside an import."""
    frames, torch_call, call_site, inside, importing = [], None, None, False, False
    while frame is not None:
        code = frame.f_code
        importing = importing or code.co_filename.startswith(IMPORTLIB)
        where = f"{code.co_filename}:{frame.f_lineno} in {code.co_name}"
        if in_distributed_api(code.co_filename, distributed_dir) and code.co_name == "<module>":
            # torch.distributed being imported (seconds on a loaded machine): no call the user made
            torch_call, call_site, inside = None, None, False
        elif in_distributed_api(code.co_filename, distributed_dir):
            inside = True
            if _names_the_call(code):
                torch_call = code.co_name  # keeps the outermost one: the call the user made
        elif inside and call_site is None:
            call_site = where
        if not _is_machinery(code.co_filename) and len(frames) < MAX_FRAMES:
            frames.append(where)
        frame = frame.f_back
    return Where(torch_call, call_site, frames, importing, len(sys.modules) if importing else None)


def _phase_raised_in(exc: BaseException, otherwise: str) -> str:
    """in-init / in-collective where the traceback passes through torch.distributed, else running or before-init."""
    distributed = torch_distributed_dir()
    tb, call = exc.__traceback__, None
    while tb is not None:
        code = tb.tb_frame.f_code
        if in_distributed_api(code.co_filename, distributed) and _names_the_call(code):
            call = call or code.co_name  # the outermost: the call the user made
        tb = tb.tb_next
    if call == "init_process_group":
        return "in-init"
    if call:
        return "in-collective"
    return "before-init" if otherwise == "before-init" else "running"


def format_all_stacks() -> str:
    """Every thread's Python stack, named, main thread first."""
    names = {t.ident: t.name for t in threading.enumerate()}
    main = threading.main_thread().ident
    return "\n".join(f"Thread {names.get(ident, '?')} ({ident}):\n{''.join(traceback.format_stack(frame))}"
                     for ident, frame in sorted(sys._current_frames().items(), key=lambda kv: kv[0] != main))


def _in_process_group() -> bool:
    """Whether the main thread has initialised the default process group. Never imports torch, and copes with
    torch.distributed half imported (this thread can look while the main thread is inside `import torch`)."""
    dist = sys.modules.get("torch.distributed")
    try:
        return bool(dist.is_available() and dist.is_initialized())
    except AttributeError:  # not imported, or not all of it yet
        return False


_current: "Beacon | None" = None


def current() -> "Beacon | None":
    """This rank's beacon, when ddplab started the rank (a drill's script notes what it injected through it)."""
    return _current


class Beacon:
    """Writer side, inside a rank: the status file always, the job's store when given a publisher."""

    def __init__(self, run: RunDir, rank: int, local_rank: int, *, world_size: int | None = None,
                 node_rank: int | None = None, address: str | None = None, publisher=None,
                 stack_signal: int | None = None, recorder_setting: str | None = None, phase: str = "before-init"):
        self.run = run
        self.rank = rank
        self.path = run.status_file(rank)
        self._lock = threading.Lock()
        self._publisher = publisher  # cluster.status_store.StatusPublisher, or None (one machine)
        self._publish_lock = threading.Lock()  # one store round trip at a time, in beat order
        self._main_ident = threading.main_thread().ident
        self._answered: str | None = None
        self._last_flight: dict | None = None
        self._recorder = flight_recorder.StatusReader()
        self._pending: tuple = ()  # the collectives its recorder shows pending, and since when
        self._pending_since: float | None = None
        # when the rank arrived at its collectives, for the launcher's straggler watch (only where it asked)
        self._arrivals = arrivals.from_environment(run, rank, publisher.publish_arrivals if publisher else None)
        self.write_error: str | None = None  # the first write that failed: supervision degraded, job unharmed
        now = time.time()
        self.state = RankState(rank=rank, local_rank=local_rank, pid=os.getpid(), phase=phase, since=now,
                               heartbeat=now, world_size=world_size, node_rank=node_rank, host=socket.gethostname(),
                               address=address, beat=0, proc_start_ticks=start_ticks(),
                               stack_signal=stack_signal, flight_recorder=recorder_setting)
        self._quietly(lambda: self.path.parent.mkdir(parents=True, exist_ok=True))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ddplab-beacon", daemon=True)

    def start(self) -> "Beacon":
        global _current
        with self._lock:
            self._write()
        self._publish()
        self._thread.start()
        _current = self
        return self

    def close(self) -> None:
        """Stop the heartbeat (the rank is ending): no thread of ours is inside a store call at exit."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=HEARTBEAT_S + 10)
        if self._arrivals is not None:
            self._arrivals.last_read()

    # ---------------------------------------------------------------------------------------- the rank's words

    def phase(self, phase: str, **extra) -> None:
        """A phase change reaches the job's store at once. A final one carries what the beacon sees now, so that a
        script shorter than a heartbeat is judged on its last collective."""
        observed = self._observe() if phase in ("finished", "failed") else {}
        self.note(phase=phase, since=time.time(), **{**observed, **extra})

    def note(self, **fields) -> None:
        """Fields that are no phase change (a drill's injection: what, when), written and published now."""
        with self._lock:
            self.state = replace(self.state, **fields)
            self._write()
        self._publish()

    def fail(self, error: str, exit_code: int | None = None, exc: BaseException | None = None) -> None:
        """The rank is failing: its error, and the phase it failed in with when it entered it (the judge tells a
        rank that waited there from one that arrived after the others gave up). For a user's script the phase is
        where ``exc`` was raised."""
        from .states import phase_of

        observed = self._observe()
        with self._lock:
            now = replace(self.state, **observed)
            failed_in, entered = phase_of(now), self.state.since
            if self.state.phase == "running" and exc is not None:
                failed_in = _phase_raised_in(exc, failed_in)
        self.phase("failed", error=redact_text(error), failed_at=time.time(), failed_in=failed_in,
                   failed_in_since=entered, exit_code=exit_code)

    def enter_collective(self, op: str, numel: int) -> int:
        with self._lock:
            self.state = replace(self.state, phase="in-collective", seq=self.state.seq + 1, op=op, numel=numel,
                                 since=time.time())
            self._write()
            return self.state.seq

    def leave_collective(self) -> None:
        with self._lock:
            self.state = replace(self.state, phase="running", done=self.state.seq, since=time.time())
            self._write()

    # ---------------------------------------------------------------------------------------- dumps

    def dump(self, request_id: str | None, note: str = "") -> None:
        """The rank's full flight record and every thread's stack, then mark the request answered."""
        record = flight_recorder.read(include_collectives=True)
        if record is not None:
            text = json.dumps({**record, "dumped_at": time.time()}, default=str)
            self._quietly(lambda: write_text_atomic(self.run.flight_file(self.rank), text, durable=False))
        # the program's source lines and the note's traceback: its words, withheld as a report withholds them
        stacks = redact_text(f"# rank {self.rank}, pid {os.getpid()}, at {time.time():.3f}\n{note}\n"
                             f"{format_all_stacks()}")
        self._quietly(lambda: write_text_atomic(self.run.stack_file(self.rank), stacks, durable=False))
        if request_id:
            self._answered = request_id
            self._quietly(lambda: write_text_atomic(self.run.answered_file(self.rank), request_id, durable=False))

    def mark_answered(self, request_id: str) -> None:
        """A request this rank made itself, after dumping: its own thread must not dump again."""
        self._answered = request_id

    # ---------------------------------------------------------------------------------------- the side thread

    def _loop(self) -> None:
        next_beat = time.monotonic() + HEARTBEAT_S
        while not self._stop.wait(TICK_S):
            try:
                request_id = self._pending_request()
                if request_id:
                    self.dump(request_id)
                    next_beat = 0.0
                if time.monotonic() >= next_beat:
                    # under the lock: a final phase() written meanwhile must not be followed by older progress
                    with self._lock:
                        self.state = replace(self.state, **self._observe())
                        self._write()
                    self._publish()
                    next_beat = time.monotonic() + HEARTBEAT_S
                if self._arrivals is not None:  # a slow read, seconds apart, within a tick of the other ranks'
                    self._arrivals.tick(time.time(), bool(self.state.in_process_group))
            except Exception as exc:  # never take the rank down; say once why the beacon went quiet
                self._note_failure(f"{type(exc).__name__}: {exc}")
                self._stop.wait(HEARTBEAT_S)

    def _observe(self) -> dict:
        frame = sys._current_frames().get(self._main_ident)
        status = self._recorder.read()
        if status:
            self._last_flight = status
        seen = status or self._last_flight
        progress = progress_of(seen)
        pending = tuple(sorted((pg, p.enqueued) for pg, p in (progress or {}).items() if p.enqueued > p.completed))
        if pending != self._pending:
            self._pending, self._pending_since = pending, (time.time() if pending else None)
        return {"where": locate(frame, torch_distributed_dir()), "in_process_group": _in_process_group(),
                "progress": progress, "recorder": (seen or {}).get("recorder"), "pending_since": self._pending_since}

    def _pending_request(self) -> str | None:
        request_id = requested(self.run)
        return request_id if request_id != self._answered else None

    def _write(self) -> None:
        self.state = replace(self.state, heartbeat=time.time(), beat=(self.state.beat or 0) + 1)
        text = json.dumps(to_json(self.state))
        # Rewritten at every collective: atomic for the watcher, not fsync'ed (files.py).
        self._quietly(lambda: write_text_atomic(self.path, text, durable=False))

    def _publish(self) -> None:
        """The current record to the job's store, outside the state lock: a collective does not wait for the network."""
        if self._publisher is None:
            return
        with self._publish_lock:
            with self._lock:
                snapshot = self.state
            self._publisher.publish(snapshot)

    def _quietly(self, write) -> None:
        try:
            write()
        except Exception as exc:  # noqa: BLE001 - ddplab's bookkeeping must never fail the user's job
            self._note_failure(str(exc))

    def _note_failure(self, what: str) -> None:
        if self.write_error is None:
            self.write_error = what
            with contextlib.suppress(Exception):  # noqa: BLE001 - not even stderr: nothing more to say
                print(f"ddplab: rank {self.rank} could not write its supervision files ({what}); the job goes on, "
                      "with this rank's supervision degraded", file=sys.stderr, flush=True)
