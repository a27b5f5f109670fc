"""Each rank's phase and heartbeat, written where the launcher's supervisor can read them.

A rank writes <run_dir>/status/<rank>.json (atomically: write, then rename) whenever its
phase changes, and a heartbeat thread rewrites it every ``HEARTBEAT_S``. Phases:
    before-init -> in-init -> running -> in-collective (#seq, op, numel) -> finished | failed
``seq`` counts collectives the rank has *entered*; ``done`` those it has completed.
Comparing them across ranks names the rank that never arrived or fell behind, rather
than the first rank to die (which is what torchrun blames).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from .files import write_text_atomic

HEARTBEAT_S = 0.5


class RankStatus:
    """Writer side, inside a rank."""

    def __init__(self, run_dir: str, rank: int):
        self.path = Path(run_dir, "status", f"{rank}.json")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.state = {"rank": rank, "pid": os.getpid(), "phase": "before-init", "seq": 0, "done": 0,
                      "op": None, "numel": None, "since": time.time(), "heartbeat": time.time()}
        self._write()
        threading.Thread(target=self._beat, name="ddplab-heartbeat", daemon=True).start()

    def phase(self, phase: str, **extra) -> None:
        with self._lock:
            self.state.update(phase=phase, since=time.time(), **extra)
            self._write()

    def enter_collective(self, op: str, numel: int) -> int:
        with self._lock:
            self.state.update(phase="in-collective", seq=self.state["seq"] + 1, op=op, numel=numel,
                              since=time.time())
            self._write()
            return self.state["seq"]

    def leave_collective(self) -> None:
        with self._lock:
            self.state.update(phase="running", done=self.state["seq"], since=time.time())
            self._write()

    def _beat(self) -> None:
        while True:
            time.sleep(HEARTBEAT_S)
            with self._lock:
                self._write()

    def _write(self) -> None:
        self.state["heartbeat"] = time.time()
        # Rewritten at every collective: atomic for the supervisor, not fsync'ed (files.py).
        write_text_atomic(self.path, json.dumps(self.state), durable=False)


def read_all(run_dir: str | Path) -> dict[int, dict]:
    out = {}
    for f in Path(run_dir, "status").glob("*.json"):
        try:
            out[int(f.stem)] = json.loads(f.read_text())
        except (ValueError, OSError):
            continue
    return out


def progress_key(states: dict[int, dict]) -> tuple:
    """What counts as progress: any rank's phase, entered or completed collective changing."""
    return tuple(sorted((r, s["phase"], s["seq"], s["done"]) for r, s in states.items()))


def name_culprits(states: dict[int, dict], world_size: int, now: float, stale_s: float) -> tuple[list[int], str]:
    """The ranks holding the others up, and why, from a snapshot of every rank's status."""
    missing = [r for r in range(world_size) if r not in states]
    if missing:
        return missing, "never started (no status written)"
    frozen = [r for r, s in states.items() if now - s["heartbeat"] > stale_s]
    if frozen:
        return sorted(frozen), f"heartbeat stopped for more than {stale_s:.0f} s (process paused or wedged)"
    not_in_init = [r for r, s in states.items() if s["phase"] == "before-init"]
    if not_in_init and len(not_in_init) < world_size:
        return sorted(not_in_init), "never reached init_process_group while the others waited in it"
    entered = {r: s["seq"] for r, s in states.items()}
    low = min(entered.values())
    if low < max(entered.values()):
        behind = sorted(r for r, v in entered.items() if v == low)
        return behind, f"entered {low} collectives while others entered {max(entered.values())}"
    waiting = [r for r, s in states.items() if s["phase"] == "in-collective"]
    idle = sorted(r for r in states if r not in waiting)
    if waiting and idle:
        return idle, "not inside the collective the others are waiting in"
    ops = {(s["op"], s["numel"]) for s in states.values() if s["phase"] == "in-collective"}
    if len(ops) > 1:
        detail = "; ".join(f"rank {r}: {s['op']}({s['numel']}) #{s['seq']}" for r, s in sorted(states.items()))
        return sorted(states), f"ranks issued different collectives: {detail}"
    return sorted(states), "every rank is inside the same collective (the library or the link is stuck)"
