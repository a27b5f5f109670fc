"""Each rank's phase and heartbeat, written where the launcher's supervisor can read them.

A rank writes its status file (RunDir.status_file, atomically: write, then rename) whenever its
phase changes, and a heartbeat thread rewrites it every ``HEARTBEAT_S``. Phases:
    before-init -> in-init -> running -> in-collective (#seq, op, numel) -> finished | failed
(``timing`` and ``stalled`` are variants of running, set by timed_windows.py and the stall drill).
``seq`` counts collectives the rank has *entered*; ``done`` those it has completed. Comparing
them across ranks names the rank that never arrived or fell behind, rather than the first rank
to die (which is what torchrun blames). Ranks are named by their GLOBAL rank everywhere; a
machine's supervisor expects its own block of ranks (``expected_ranks``).
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import replace

from .files import write_text_atomic
from .records.codec import RecordError, from_json, to_json
from .records.session import RankState
from .rundir import RunDir

HEARTBEAT_S = 0.5
WAITING_PHASES = ("in-collective", "in-init")


class RankStatus:
    """Writer side, inside a rank."""

    def __init__(self, run: RunDir, rank: int, local_rank: int):
        self.path = run.status_file(rank)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        now = time.time()
        self.state = RankState(rank=rank, local_rank=local_rank, pid=os.getpid(), phase="before-init", since=now,
                               heartbeat=now)
        self._write()
        threading.Thread(target=self._beat, name="ddplab-heartbeat", daemon=True).start()

    def phase(self, phase: str, **extra) -> None:
        with self._lock:
            self.state = replace(self.state, phase=phase, since=time.time(), **extra)
            self._write()

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

    def _beat(self) -> None:
        while True:
            time.sleep(HEARTBEAT_S)
            with self._lock:
                self._write()

    def _write(self) -> None:
        self.state = replace(self.state, heartbeat=time.time())
        # Rewritten at every collective: atomic for the supervisor, not fsync'ed (files.py).
        write_text_atomic(self.path, json.dumps(to_json(self.state)), durable=False)


def read_all(run: RunDir) -> dict[int, RankState]:
    """Every rank's last status on this machine, by global rank (a file being replaced is skipped)."""
    out = {}
    for f in run.status_files():
        try:
            state = from_json(RankState, json.loads(f.read_text()))
        except (ValueError, OSError, RecordError):
            continue
        out[state.rank] = state
    return out


def progress_key(states: dict[int, RankState]) -> tuple:
    """What counts as progress: any rank's phase, entered or completed collective changing."""
    return tuple(sorted((r, s.phase, s.seq, s.done) for r, s in states.items()))


def expected_ranks(states: dict[int, RankState], local_count: int) -> list[int] | None:
    """This machine's global ranks: its block of ``local_count``, located by its lowest rank that reported.
    None while no rank has written a status (their global numbers are not known yet)."""
    if not states:
        return None
    base = states[min(states)].node_base
    return list(range(base, base + local_count))


def name_culprits(states: dict[int, RankState], local_count: int, now: float,
                  stale_s: float) -> tuple[list[int], str]:
    """The ranks holding the others up, and why, from a snapshot of this machine's ranks' status."""
    unseen = _not_started(states, local_count)
    if unseen:
        return unseen
    frozen = [r for r, s in states.items() if now - s.heartbeat > stale_s]
    if frozen:
        return sorted(frozen), f"heartbeat stopped for more than {stale_s:.0f} s (process paused or wedged)"
    return _holding_up(states, waiting_phases=("in-collective",))


def name_culprits_after_exit(states: dict[int, RankState], local_count: int) -> tuple[list[int], str]:
    """The same judgement from the last status each rank wrote, once the ranks are gone (a drill reads them
    after its run). Heartbeats say nothing then, since every rank stopped beating; and a rank that failed was
    inside the collective that raised: "failed" stands where its status said "in-collective"."""
    return _not_started(states, local_count) or _holding_up(states, waiting_phases=("in-collective", "failed"))


def _not_started(states: dict[int, RankState], local_count: int) -> tuple[list[int], str] | None:
    expected = expected_ranks(states, local_count)
    if expected is None:
        return [], f"none of this machine's {local_count} rank(s) wrote a status (never started)"
    missing = [r for r in expected if r not in states]
    if missing:
        return missing, "never started (no status written)"
    return None


def _holding_up(states: dict[int, RankState], waiting_phases: tuple[str, ...]) -> tuple[list[int], str]:
    """Who is behind, by phase and collective sequence, among ranks that all wrote a status."""
    not_in_init = [r for r, s in states.items() if s.phase == "before-init"]
    if not_in_init and len(not_in_init) < len(states):
        return sorted(not_in_init), "never reached init_process_group while the others waited in it"
    if not_in_init:  # every rank here: the ranks waiting for them, if any, are on other machines
        return sorted(not_in_init), "never reached init_process_group"
    entered = {r: s.seq for r, s in states.items()}
    low = min(entered.values())
    if low < max(entered.values()):
        behind = sorted(r for r, v in entered.items() if v == low)
        return behind, f"entered {low} collectives while others entered {max(entered.values())}"
    waiting = [r for r, s in states.items() if s.phase in waiting_phases]
    idle = sorted(r for r in states if r not in waiting)
    if waiting and idle:
        return idle, "not inside the collective the others are waiting in"
    if not any(s.phase in (*waiting_phases, "in-init") for s in states.values()):
        # e.g. on one machine of a larger job, whose ranks waiting for these are elsewhere
        return idle, "stopped making progress outside any collective (no rank here waits in one)"
    ops = {(s.op, s.numel) for s in states.values() if s.phase in waiting_phases}
    if len(ops) > 1:
        detail = "; ".join(f"rank {r}: {s.op}({s.numel}) #{s.seq}" for r, s in sorted(states.items()))
        return sorted(states), f"ranks issued different collectives: {detail}"
    return sorted(states), "every rank is inside the same collective (the library or the link is stuck)"
