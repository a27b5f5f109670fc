"""ddplab's own hang detection, in the launcher.

Watches the status files of this machine's ranks (status.py). When no rank makes progress for
``hang_timeout_s``, it declares a hang, names the culprits by GLOBAL rank by comparing phases and
collective sequence numbers (status.name_culprits), asks every rank for its Python stacks (SIGUSR1 ->
faulthandler, into RunDir.stack_file), then tears the group down: SIGTERM, and SIGKILL after a grace
period. Elastic then sees the ranks die and returns.

The hang clock starts once every local rank has written its first status: a rank still importing
torch on a busy machine is slow, not hung (elastic notices a rank that dies while starting). A rank
that never writes one is named "never started" only after ``START_GRACE_S`` more.
"""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import replace

from . import status
from .procs import alive, signal_quietly
from .records.session import HangRecord
from .rundir import RunDir

POLL_S = 0.25
STACK_WAIT_S = 1.0
START_GRACE_S = 120.0  # for ranks that never write a status at all: far above torch's import time


class Supervisor:
    def __init__(self, run: RunDir, local_count: int, hang_timeout_s: float | None, grace_s: float = 3.0):
        self.run = run
        self.local_count = local_count
        self.hang_timeout_s = hang_timeout_s
        self.grace_s = grace_s
        self.hang: HangRecord | None = None  # filled when a hang is declared
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ddplab-supervisor", daemon=True)

    def __enter__(self):
        if self.hang_timeout_s:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.grace_s + 5)

    def _loop(self) -> None:
        started = time.time()
        last_key, last_change = None, None
        while not self._stop.wait(POLL_S):
            states = status.read_all(self.run)
            now = time.time()
            if any(s.phase in ("finished", "failed") for s in states.values()):
                last_key, last_change = None, None  # the run is ending: elastic handles it
                continue
            if len(states) < self.local_count:
                if now - started >= START_GRACE_S + self.hang_timeout_s:
                    self._declare(states, now, now - started)
                    return
                continue
            key = status.progress_key(states)
            if key != last_key or last_change is None:
                last_key, last_change = key, now
                continue
            if now - last_change >= self.hang_timeout_s:
                self._declare(states, now, now - last_change)
                return

    def _declare(self, states: dict[int, status.RankState], now: float, stalled_s: float) -> None:
        culprits, why = status.name_culprits(states, self.local_count, now,
                                             stale_s=max(2.0, 4 * status.HEARTBEAT_S))
        pids = {r: s.pid for r, s in states.items()}
        for pid in pids.values():
            signal_quietly(pid, signal.SIGCONT)  # a paused rank cannot dump its stack
            signal_quietly(pid, signal.SIGUSR1)
        time.sleep(STACK_WAIT_S)
        stacks = {rank: str(self.run.stack_file(rank)) for rank in pids if self.run.stack_file(rank).exists()}
        self.hang = HangRecord(detected_at=now, no_progress_s=round(stalled_s, 2), culprit_ranks=culprits,
                               reason=why, snapshot=dict(states), stacks=stacks)
        for pid in pids.values():
            signal_quietly(pid, signal.SIGTERM)
        deadline = time.time() + self.grace_s
        while time.time() < deadline and any(alive(p) for p in pids.values()):
            time.sleep(0.1)
        killed = [p for p in pids.values() if alive(p)]
        for pid in killed:
            signal_quietly(pid, signal.SIGKILL)
        self.hang = replace(self.hang, killed_after_grace=killed)
