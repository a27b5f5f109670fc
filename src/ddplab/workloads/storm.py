"""Latency storm: the report's 10,000 x 4-byte all_reduce, measured so the numbers hold.

Passes, each after a barrier, so none disturbs another:
  1. pipelined mean: N all_reduces back to back, one device sync, wall / N. This is the
     report's "avg latency", with the synchronisation the report's script lacks. The
     rank's CPU user/system time and context switches are read around this pass only.
  2. seed method: the report's exact code (time.time around the loop, then a barrier).
  3. per-op distribution: host clock around each op with a device sync after it (blocking).
  4. device side: event pairs around each op (accelerators): the op's device time. The
     pipelined mean minus this is the framework's dispatch overhead per op.
No graph capture: capturing NCCL collectives hung on the H200 machines (docs/background.md §4).
"""

from __future__ import annotations

import resource
import time

from ..records.storm import StormRankResult, StormSettings
from .common import barrier, blocking_us, device_event_us, distribution, histogram, pipelined_us
from .machines import storm_groups

SUMMARY = "10,000 tiny all_reduces: mean latency, per-op distribution, CPU cost, device time"


def run(ctx) -> StormRankResult:
    import torch
    import torch.distributed as dist

    s: StormSettings = ctx.settings
    count = max(1, s.bytes // 4)
    buf = torch.zeros(count, dtype=torch.float32, device=ctx.device)  # sums of zeros stay zero

    def op():
        dist.all_reduce(buf)

    for _ in range(s.warmup):
        op()
    ctx.runtime.synchronize()
    barrier()

    before = resource.getrusage(resource.RUSAGE_SELF)
    wall0 = time.perf_counter()
    mean_us = pipelined_us(op, ctx.runtime, s.iters)
    wall_s = time.perf_counter() - wall0
    after = resource.getrusage(resource.RUSAGE_SELF)

    barrier()
    t0 = time.time()  # the report's method, kept as it was written
    for _ in range(s.iters):
        op()
    dist.barrier()
    seed_method_us = (time.time() - t0) / s.iters * 1e6

    barrier()
    per_op = blocking_us(op, ctx.runtime, s.per_op_iters)
    barrier()
    device = device_event_us(op, ctx.runtime, s.per_op_iters)

    buf.fill_(ctx.rank + 1)  # correctness: sum of 1..n
    op()
    ctx.runtime.synchronize()
    expected = ctx.world_size * (ctx.world_size + 1) / 2
    correct = bool((buf == expected).all())

    return StormRankResult(
        mean_us=mean_us,
        seed_method_us=seed_method_us,
        per_op_us=distribution(per_op),
        per_op_histogram=histogram(per_op),
        device_us=distribution(device) if device else None,
        cpu_user_s=after.ru_utime - before.ru_utime,
        cpu_system_s=after.ru_stime - before.ru_stime,
        ctx_switches=(after.ru_nvcsw - before.ru_nvcsw) + (after.ru_nivcsw - before.ru_nivcsw),
        storm_wall_s=wall_s,
        correct=correct,
        machines=storm_groups(ctx, s),  # across machines: the storm again inside and between them
    )
