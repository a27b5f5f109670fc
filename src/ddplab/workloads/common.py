"""Timing and statistics shared by the benchmark workloads; names no collective.

Modes, as nccl-tests defines them (docs/metrics.md):
  pipelined - N launches back to back (async_op=True, waited at the end), one device sync, wall time / N
  blocking  - device sync after every op, mean of the per-op wall times (nccl-tests -z 1)
  events    - device events around each op, no host sync in between: device-side time
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

from ..supervision import timed_windows
from ..records.session import Histogram
from ..records.sweep import Repetition

def barrier() -> None:
    import torch.distributed as dist

    dist.barrier()


def pipelined_us(run: Callable[[], None], runtime, iters: int) -> float:
    runtime.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        run()
    runtime.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6


def blocking_us(run: Callable[[], None], runtime, iters: int) -> list[float]:
    times = []
    runtime.synchronize()
    for _ in range(iters):
        t0 = time.perf_counter()
        run()
        runtime.synchronize()
        times.append((time.perf_counter() - t0) * 1e6)
    return times


def device_event_us(run: Callable[[], None], runtime, iters: int) -> list[float] | None:
    """Device-side time of each op from event pairs; None where the device has no events (host)."""
    pairs = []
    for _ in range(iters):
        start, end = runtime.new_event(), runtime.new_event()
        if start is None:
            return None
        start.record()
        run()
        end.record()
        pairs.append((start, end))
    runtime.synchronize()
    return [s.elapsed_time(e) * 1e3 for s, e in pairs]  # elapsed_time is in ms


def pipelined_async_us(run: Callable[..., object], runtime, iters: int) -> float:
    runtime.synchronize()
    t0 = time.perf_counter()
    works = [run(async_op=True) for _ in range(iters)]
    for work in works:
        for w in work if isinstance(work, list) else [work]:
            w.wait()
    runtime.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6


def time_mode(run: Callable[..., object], runtime, iters: int, mode: str, pipelined=pipelined_async_us) -> float:
    """One nccl-tests measurement of ``iters`` calls. ``pipelined``: how that mode waits for them (torch's calls
    return work handles; the library engine's calls return at once: N calls, then one wait, pipelined_us)."""
    if mode == "pipelined":
        return pipelined(run, runtime, iters)
    return statistics.fmean(blocking_us(run, runtime, iters))


def timed_repetition(ctx, timed: Callable[[], float], meet: Callable[[], None]) -> Repetition:
    """One measurement, ``timed()``, after the ranks ``meet()``, inside a wall-clock window the launcher's sampler
    keeps out of (supervision/timed_windows.py)."""
    with timed_windows.timing(ctx.status) as waited_s:
        ctx.runtime.synchronize()  # the whole device: no engine's earlier calls run into this window
        meet()
        start = time.time()
        time_us = timed()
        end = time.time()
    return Repetition(time_us=time_us, window=(start, end), sampler_wait_s=round(waited_s, 6))


HISTOGRAM_EDGES_US = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000]


def histogram(values: list[float]) -> Histogram:
    """Counts per log-spaced latency bin (edges in us; the last bin is open-ended)."""
    import bisect

    counts = [0] * (len(HISTOGRAM_EDGES_US) + 1)
    for v in values:
        counts[bisect.bisect_right(HISTOGRAM_EDGES_US, v)] += 1
    return Histogram(list(HISTOGRAM_EDGES_US), counts)
