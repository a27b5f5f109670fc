"""ddplab's own hang detection, in the launcher.

Watches every rank's status file. When no rank makes progress for ``hang_timeout_s``,
it declares a hang, names the culprits by comparing phases and collective sequence
numbers (status.name_culprits), asks every rank for its Python stacks (SIGUSR1 ->
faulthandler, into <run_dir>/stacks/<rank>.txt), then tears the group down: SIGTERM,
and SIGKILL after a grace period. Elastic then sees the ranks die and returns.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from . import status

POLL_S = 0.25
STACK_WAIT_S = 1.0


class Supervisor:
    def __init__(self, run_dir: str | Path, world_size: int, hang_timeout_s: float | None, grace_s: float = 3.0):
        self.run_dir = Path(run_dir)
        self.world_size = world_size
        self.hang_timeout_s = hang_timeout_s
        self.grace_s = grace_s
        self.hang: dict | None = None  # filled when a hang is declared
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
        last_key, last_change = None, time.time()
        while not self._stop.wait(POLL_S):
            states = status.read_all(self.run_dir)
            if any(s["phase"] in ("finished", "failed") for s in states.values()):
                last_key, last_change = None, time.time()  # the run is ending: elastic handles it
                continue
            key = status.progress_key(states)
            now = time.time()
            if key != last_key:
                last_key, last_change = key, now
                continue
            if now - last_change >= self.hang_timeout_s:
                self._declare(states, now, now - last_change)
                return

    def _declare(self, states: dict[int, dict], now: float, stalled_s: float) -> None:
        culprits, why = status.name_culprits(states, self.world_size, now, stale_s=max(2.0, 4 * status.HEARTBEAT_S))
        self.hang = {"detected_at": now, "no_progress_s": round(stalled_s, 2), "culprit_ranks": culprits,
                     "reason": why, "snapshot": states, "stacks": {}}
        pids = {r: s["pid"] for r, s in states.items()}
        for pid in pids.values():
            _signal(pid, signal.SIGCONT)  # a paused rank cannot dump its stack
            _signal(pid, signal.SIGUSR1)
        time.sleep(STACK_WAIT_S)
        for rank in pids:
            path = self.run_dir / "stacks" / f"{rank}.txt"
            if path.exists():
                self.hang["stacks"][rank] = str(path)
        for pid in pids.values():
            _signal(pid, signal.SIGTERM)
        deadline = time.time() + self.grace_s
        while time.time() < deadline and any(_alive(p) for p in pids.values()):
            time.sleep(0.1)
        killed = [p for p in pids.values() if _alive(p)]
        for pid in killed:
            _signal(pid, signal.SIGKILL)
        self.hang["killed_after_grace"] = killed


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
