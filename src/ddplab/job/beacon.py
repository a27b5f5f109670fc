"""The side thread in each rank of a supervised job: heartbeat, progress, dumps on request.

Every ``HEARTBEAT_S`` it rewrites the rank's status file with where the main thread is
(inside init_process_group, inside a collective, or in user code, with the innermost
frames) and the flight recorder's per-group status (last enqueued / completed collective),
which is what the launcher compares across ranks. Every ``TICK_S`` it looks for a dump
request (a file the launcher or a failing rank writes) and answers it with the rank's full
flight record and every thread's Python stack.

A thread, not a signal handler: the main thread may sit in a collective for ever, and a
Python signal handler only runs when the main thread returns to the interpreter. This
thread runs whenever the main thread releases the GIL, which waiting in a collective does.
When something holds the GIL, faulthandler's signal (boot.STACK_SIGNAL) is the way in.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
import traceback

from ..platform import flight_recorder
from .layout import JobDir, write_json_atomically

HEARTBEAT_S = 0.5
TICK_S = 0.1
MAX_FRAMES = 8

_JOB_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _is_machinery(filename: str) -> bool:
    """Frames between the interpreter and the user's code (boot, runpy): left out of "where"."""
    return filename.startswith(_JOB_PACKAGE_DIR) or filename == "<frozen runpy>" or filename.endswith(os.sep + "runpy.py")


def progress_of(record: dict | None) -> dict[str, dict[str, int]] | None:
    """The per-group status of a flight record as integers: {pg id: {enqueued, started, completed}}.

    JSON dumps carry them as strings, pickle dumps as integers; -1 means none yet.
    """
    if not record or not record.get("pg_status"):
        return None
    return {str(pg): {"enqueued": int(s.get("last_enqueued_collective", -1)),
                      "started": int(s.get("last_started_collective", -1)),
                      "completed": int(s.get("last_completed_collective", -1))}
            for pg, s in record["pg_status"].items()}


def torch_distributed_dir() -> str | None:
    module = sys.modules.get("torch.distributed")
    path = getattr(module, "__file__", None)
    return os.path.dirname(path) + os.sep if path else None


def locate(frame, distributed_dir: str | None) -> dict:
    """Where a thread is: the outermost torch.distributed call it is inside (the API the user
    called: init_process_group, all_reduce, barrier...), the user's line that called it, and
    the innermost frames."""
    frames, torch_call, call_site, inside = [], None, None, False
    while frame is not None:
        code = frame.f_code
        in_distributed = bool(distributed_dir) and code.co_filename.startswith(distributed_dir)
        where = f"{code.co_filename}:{frame.f_lineno} in {code.co_name}"
        if in_distributed:
            inside = True
            if not code.co_filename.endswith("c10d_logger.py"):  # the logging decorator's wrapper
                torch_call = code.co_name  # keeps the outermost one: the call the user made
        elif inside and call_site is None:
            call_site = where
        if not _is_machinery(code.co_filename) and len(frames) < MAX_FRAMES:
            frames.append(where)
        frame = frame.f_back
    return {"torch_call": torch_call, "call_site": call_site, "frames": frames}


def format_all_stacks() -> str:
    """Every thread's Python stack, named, main thread first."""
    names = {t.ident: t.name for t in threading.enumerate()}
    main = threading.main_thread().ident
    out = []
    for ident, frame in sorted(sys._current_frames().items(), key=lambda kv: kv[0] != main):
        out.append(f"Thread {names.get(ident, '?')} ({ident}):\n{''.join(traceback.format_stack(frame))}")
    return "\n".join(out)


def _process_start_ticks() -> int | None:
    """This process's start time in clock ticks since boot (/proc/self/stat field 22): with
    the pid, it identifies the process, so the launcher never signals a reused pid."""
    try:
        with open("/proc/self/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _in_process_group() -> bool:
    """Whether the main thread has initialised the default process group. Never imports torch,
    and copes with torch.distributed half imported: this thread can look while the main thread
    is still inside `import torch`, when the module exists but its functions are not defined yet
    (seen on 2x H200: every rank wrote beacon-error.txt, docs/RESULTS.md)."""
    dist = sys.modules.get("torch.distributed")
    is_available = getattr(dist, "is_available", None)
    is_initialized = getattr(dist, "is_initialized", None)
    if is_available is None or is_initialized is None:
        return False
    return bool(is_available() and is_initialized())


class Beacon:
    def __init__(self, job: JobDir, rank: int, stack_signal: int | None, recorder_setting: str):
        self.job = job
        self.rank = rank
        self.main_ident = threading.main_thread().ident
        self._lock = threading.Lock()
        self._answered: str | None = None
        self._last_flight: dict | None = None
        self.state = {
            "rank": rank,
            "local_rank": int(os.environ.get("LOCAL_RANK", rank)),
            "world_size": int(os.environ.get("WORLD_SIZE", 0)) or None,
            "pid": os.getpid(),
            "proc_start_ticks": _process_start_ticks(),
            "host": socket.gethostname(),
            "started_at": time.time(),
            "phase": "running",
            "heartbeat_s": HEARTBEAT_S,
            "stack_signal": stack_signal,
            "flight_recorder": recorder_setting,
        }

    def start(self) -> "Beacon":
        self.beat()
        threading.Thread(target=self._loop, name="ddplab-beacon", daemon=True).start()
        return self

    def beat(self, **changes) -> None:
        """Rewrite the status file now (the thread does it every HEARTBEAT_S)."""
        with self._lock:
            self.state.update(changes)
            self.state.update(self._observe())
            write_json_atomically(self.job.status_file(self.rank), self.state)

    def _observe(self) -> dict:
        frame = sys._current_frames().get(self.main_ident)
        status = flight_recorder.read(include_collectives=False)
        if status:
            self._last_flight = status
        return {
            "heartbeat": time.time(),
            "where": locate(frame, torch_distributed_dir()),
            "in_process_group": _in_process_group(),
            "progress": progress_of(status or self._last_flight),
            "recorder": (status or self._last_flight or {}).get("recorder"),
        }

    def dump(self, request_id: str | None, note: str = "") -> None:
        """The rank's full flight record and every thread's stack, then mark the request answered."""
        record = flight_recorder.read(include_collectives=True)
        if record is not None:
            write_json_atomically(self.job.flight_file(self.rank), {**record, "dumped_at": time.time()})
        stacks = self.job.stacks_file(self.rank)
        stacks.write_text(f"# rank {self.rank}, pid {os.getpid()}, at {time.time():.3f}\n{note}\n{format_all_stacks()}")
        if request_id:
            self._answered = request_id
            self.job.answered_file(self.rank).write_text(request_id)

    def mark_answered(self, request_id: str) -> None:
        """A request this rank made itself, after dumping: its own thread must not dump again."""
        self._answered = request_id

    def _pending_request(self) -> str | None:
        request = self.job.read_request()
        if request and request.get("id") != self._answered:
            return request["id"]
        return None

    def _loop(self) -> None:
        next_beat = time.monotonic() + HEARTBEAT_S
        while True:
            time.sleep(TICK_S)
            try:
                request_id = self._pending_request()
                if request_id:
                    self.dump(request_id)
                    self.beat()
                if time.monotonic() >= next_beat:
                    self.beat()
                    next_beat = time.monotonic() + HEARTBEAT_S
            except Exception as exc:  # never take the rank down; say why the beacon went quiet
                try:
                    self.job.rank_dir(self.rank).joinpath("beacon-error.txt").write_text(repr(exc))
                except OSError:
                    pass
                time.sleep(HEARTBEAT_S)
