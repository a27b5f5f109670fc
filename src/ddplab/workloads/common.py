"""Timing and statistics shared by the benchmark workloads; names no collective.

Modes, as nccl-tests defines them (docs/metrics.md):
  pipelined - N launches back to back, one device sync, wall time / N (nccl-tests' default).
              Collectives are issued with async_op=True and waited at the end, so (as in
              nccl-tests) no op waits for the previous one on the host or the compute stream.
  blocking  - device sync after every op, mean of the per-op wall times (nccl-tests -z 1)
  events    - device events around each op, no host sync in between: device-side time
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

from ..records.session import Distribution, Histogram

MODES = ("pipelined", "blocking")


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


def time_mode(run: Callable[..., object], runtime, iters: int, mode: str) -> float:
    if mode == "pipelined":
        return pipelined_async_us(run, runtime, iters)
    return statistics.fmean(blocking_us(run, runtime, iters))


def distribution(values: list[float]) -> Distribution:
    """p50/p90/p99/max by nearest rank: each one a value that was measured."""
    return Distribution.of(values)


HISTOGRAM_EDGES_US = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000]


def histogram(values: list[float]) -> Histogram:
    """Counts per log-spaced latency bin (edges in us; the last bin is open-ended)."""
    import bisect

    counts = [0] * (len(HISTOGRAM_EDGES_US) + 1)
    for v in values:
        counts[bisect.bisect_right(HISTOGRAM_EDGES_US, v)] += 1
    return Histogram(list(HISTOGRAM_EDGES_US), counts)
