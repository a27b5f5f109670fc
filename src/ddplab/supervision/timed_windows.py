"""Timed windows that the launcher's sampler keeps out of: a device query landing inside a benchmark's window of a
few milliseconds is the suspect for single sweep sizes that came out 5-15x slower than their neighbours.

  rank     marks its status "timing", waits while the sampler's flag exists, then times; then "running" again.
  sampler  creates its flag, queries the device only if no rank's status says "timing", then removes the flag.

Each side raises its own flag before it reads the other's (Dekker's mutual exclusion, with files), so they cannot
both go ahead. Both note their windows' wall-clock times, so a report can show no overlap (``overlaps``).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

from .states import read_states
from ..basics.rundir import RunDir

TIMING_PHASE = "timing"
AFTER_TIMING_PHASE = "running"
MAX_WAIT_S = 2.0  # a rank never waits longer for the sampler; it then times anyway, and overlaps() shows it
POLL_S = 0.0005


@contextmanager
def device_query(run: RunDir) -> Iterator[bool]:
    """Launcher side: yields True when the device may be queried now, False when a rank is timing."""
    run.sampler_flag.parent.mkdir(parents=True, exist_ok=True)  # beside the ranks' directories (basics/rundir.py)
    run.sampler_flag.touch()
    try:
        yield not any(s.phase == TIMING_PHASE for s in read_states(run).values())
    finally:
        run.sampler_flag.unlink(missing_ok=True)


@contextmanager
def timing(rank_status) -> Iterator[float]:
    """Rank side: mark a timed window, wait out a device query in progress, then run the body; yields the seconds
    waited. ``rank_status``: the rank's Beacon (None outside a launched rank: nothing is marked or waited for)."""
    if rank_status is None:
        yield 0.0
        return
    rank_status.phase(TIMING_PHASE)
    start = time.monotonic()
    try:
        while rank_status.run.sampler_flag.exists() and time.monotonic() - start < MAX_WAIT_S:
            time.sleep(POLL_S)
        yield time.monotonic() - start
    finally:
        rank_status.phase(AFTER_TIMING_PHASE)


def overlaps(window: tuple[float, float], queries: list[tuple[float, float]]) -> bool:
    """Did any device query (wall-clock start, end) overlap this timed window?"""
    start, end = window
    return any(q_start < end and q_end > start for q_start, q_end in queries)
