"""The time-slicing tax: K processes running the same compute kernel on one device.

Rank 0 runs a matmul loop alone for ``seconds``, then every rank runs it at once; each counts finished matmuls in
its window and reports TFLOP/s. A fixed window, not a fixed count, keeps all K busy for the whole measurement.
Each rank also reports its threads and usable cores, which bound the ideal aggregate the launcher judges against.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

from ..records.contention import ContentionRankResult, ContentionSettings, MatmulRate
from .common import barrier

CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def _rate_tflops(ctx, a, b, seconds: float, batch: int) -> MatmulRate:
    flops_per = 2 * a.shape[0] ** 3
    done = 0
    ctx.runtime.synchronize()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(batch):
            a @ b
        ctx.runtime.synchronize()
        done += batch
    elapsed = time.perf_counter() - t0
    return MatmulRate(matmuls=done, elapsed_s=elapsed, tflops=done * flops_per / elapsed / 1e12)


def run(ctx) -> ContentionRankResult:
    import torch

    s: ContentionSettings = ctx.settings
    dtype = torch.float32 if ctx.runtime.host_only else torch.bfloat16
    g = torch.Generator(device="cpu").manual_seed(ctx.rank)
    a = torch.randn(s.size, s.size, generator=g).to(ctx.device, dtype)
    b = torch.randn(s.size, s.size, generator=g).to(ctx.device, dtype)
    for _ in range(3):
        a @ b
    ctx.runtime.synchronize()
    barrier()
    solo = _rate_tflops(ctx, a, b, s.seconds, s.batch) if ctx.rank == 0 else None
    barrier()
    together = _rate_tflops(ctx, a, b, s.seconds, s.batch)
    barrier()
    return ContentionRankResult(solo=solo, together=together, matrix=s.size, dtype=str(dtype).replace("torch.", ""),
                                threads=torch.get_num_threads(), usable_cores=usable_cores())


def usable_cores() -> int | None:
    """Cores this process may run on: its CPU affinity, lowered by a cgroup v2 CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count()
    try:
        quota = cgroup_quota_cores(CGROUP_CPU_MAX.read_text())
    except OSError:
        quota = None
    return min(cores, quota) if cores and quota else cores


def cgroup_quota_cores(cpu_max: str | None) -> int | None:
    """cgroup v2 cpu.max ("max 100000" or "150000 100000") as whole cores, rounded up; None = no quota."""
    parts = (cpu_max or "").split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        return max(1, math.ceil(int(parts[0]) / int(parts[1])))
    except (ValueError, ZeroDivisionError):
        return None
