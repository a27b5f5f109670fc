"""The launcher's side of supervision: watch every rank's status, declare a hang, collect the
evidence, tear the ranks down.

Progress is what the ranks' flight recorders say (last enqueued and completed collective
of every group) plus phase changes (running -> finished / raised) and moves into or out of
a torch.distributed call. A hang is declared when some rank waits (inside a collective or
init_process_group, or with a collective enqueued but not completed) and nothing has
progressed for the hang timeout. A job whose ranks all compute or read data for a long time
is not hung: nobody waits.

On a hang: ask every rank for its flight record and stacks (the beacon answers from a
side thread), send faulthandler's signal to the ranks that do not answer (something holds
their GIL), ask the collective library's RAS service while every rank still lives (only
with --ras: job/ras.py), then SIGTERM every rank and SIGKILL what is left after a grace period. Only
processes proven to be this job's ranks are signalled: the pid in the rank's own status
file, with the same start time, and this launcher as its parent.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from ..procs import alive, signal_quietly
from ..records.launch import JobHang
from .layout import JobDir
from .ras import RasPlan

POLL_S = 0.25
DUMP_WAIT_S = 3.0  # for ranks to answer a dump request
STACK_SIGNAL_WAIT_S = 0.5  # for faulthandler to write
GRACE_S = 3.0  # between SIGTERM and SIGKILL


def progress_key(statuses: dict[int, dict]) -> tuple:
    """What counts as progress: any rank's phase, torch.distributed call, or flight-recorder
    numbers changing, or a rank appearing."""
    key = []
    for rank, s in sorted(statuses.items()):
        flight = tuple(sorted((pg, p["enqueued"], p["completed"]) for pg, p in (s.get("progress") or {}).items()))
        key.append((rank, s.get("phase"), (s.get("where") or {}).get("torch_call"), flight))
    return tuple(key)


def waiting_ranks(statuses: dict[int, dict]) -> list[int]:
    """Ranks waiting on others: inside a torch.distributed call, or with a collective pending."""
    waiting = []
    for rank, s in sorted(statuses.items()):
        if s.get("phase") != "running":
            continue
        pending = any(p["enqueued"] > p["completed"] for p in (s.get("progress") or {}).values())
        if (s.get("where") or {}).get("torch_call") or pending:
            waiting.append(rank)
    return waiting


def is_hung(statuses: dict[int, dict], quiet_s: float, hang_timeout_s: float | None) -> bool:
    return bool(hang_timeout_s) and quiet_s >= hang_timeout_s and bool(waiting_ranks(statuses))


class Watcher:
    def __init__(self, job: JobDir, hang_timeout_s: float | None, grace_s: float = GRACE_S,
                 ras: RasPlan | None = None):
        self.job = job
        self.hang_timeout_s = hang_timeout_s
        self.grace_s = grace_s
        self.ras = ras  # None: --ras not given, nothing connects
        self.hang: JobHang | None = None  # set once, when a hang is declared
        self.first_failure_seen_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ddplab-job-watch", daemon=True)

    def __enter__(self) -> "Watcher":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        ras_s = self.ras.budget_s if self.ras else 0.0
        self._thread.join(timeout=DUMP_WAIT_S + STACK_SIGNAL_WAIT_S + ras_s + self.grace_s + 5)

    def _loop(self) -> None:
        last_key, last_change = None, time.time()
        while not self._stop.wait(POLL_S):
            statuses = self.job.statuses()
            now = time.time()
            if self.first_failure_seen_at is None and any(s.get("phase") == "raised" for s in statuses.values()):
                self.first_failure_seen_at = now
            key = progress_key(statuses)
            if key != last_key:
                last_key, last_change = key, now
            elif is_hung(statuses, now - last_change, self.hang_timeout_s):
                self._declare(statuses, last_change, now)
                return

    def _declare(self, statuses: dict[int, dict], last_change: float, now: float) -> None:
        running = {r: s for r, s in statuses.items() if s.get("phase") == "running" and _is_our_rank(s)}
        request_id = self.job.request_dumps(f"hang: no progress for {now - last_change:.1f} s", by="launcher")
        answered = self._wait_for_answers(request_id, running)
        silent = [r for r in running if r not in answered]
        for rank in silent:  # something holds its GIL: faulthandler writes from the signal handler
            if running[rank].get("stack_signal"):
                signal_quietly(running[rank]["pid"], running[rank]["stack_signal"])
        if silent:
            time.sleep(STACK_SIGNAL_WAIT_S)
        ras = self.ras.ask() if self.ras else None  # bounded (job/ras.py); the ranks are still there to answer
        terminated, killed = self._tear_down(running)
        self.hang = JobHang(declared_at=now, last_progress_at=last_change, no_progress_s=round(now - last_change, 2),
                            hang_timeout_s=self.hang_timeout_s, waiting_ranks=waiting_ranks(statuses),
                            dump_request=request_id, answered=sorted(answered), signalled_for_stacks=silent,
                            terminated=terminated, killed=killed, ras=ras)

    def _wait_for_answers(self, request_id: str, running: dict[int, dict]) -> set[int]:
        deadline = time.monotonic() + DUMP_WAIT_S
        answered: set[int] = set()
        while time.monotonic() < deadline:
            answered = {r for r in running if self.job.answered(r) == request_id}
            if len(answered) == len(running):
                break
            time.sleep(0.05)
        return answered

    def _tear_down(self, running: dict[int, dict]) -> tuple[list[int], list[int]]:
        """SIGTERM every rank, SIGKILL what is left after the grace period: (terminated, killed) ranks."""
        pids = {r: s["pid"] for r, s in running.items() if _is_our_rank(s)}
        for pid in pids.values():
            signal_quietly(pid, signal.SIGCONT)  # a stopped process cannot act on SIGTERM
            signal_quietly(pid, signal.SIGTERM)
        deadline = time.monotonic() + self.grace_s
        while time.monotonic() < deadline and any(alive(p) for p in pids.values()):
            time.sleep(0.05)
        killed = sorted(r for r, p in pids.items() if alive(p))
        for rank in killed:
            signal_quietly(pids[rank], signal.SIGKILL)
        return sorted(r for r in pids if r not in killed), killed


def _is_our_rank(status: dict) -> bool:
    """The pid in a status file is still that rank: same start time, and this launcher is its parent."""
    pid = status.get("pid")
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, TypeError):
        return False
    parent, start_ticks = int(fields[1]), int(fields[19])
    return parent == os.getpid() and start_ticks == status.get("proc_start_ticks")
