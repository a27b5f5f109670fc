"""Latency storm: the report's 10,000 x 4-byte all_reduce, measured so the numbers hold.

Passes, each after a barrier, so none disturbs another:
  1. pipelined mean: N all_reduces back to back, one device sync, wall / N: the report's "avg latency", with the
     synchronisation its script lacks; the rank's CPU time and context switches are read around this pass only.
  2. seed method: the report's exact code (time.time around the loop, then a barrier).
  3. per-op distribution: host clock around each op with a device sync after it (blocking).
  4. device side: event pairs around each op (accelerators); the pipelined mean minus this is the dispatch cost.
With ``--engine both`` each pass runs through torch and then through the library on the same buffer.
No graph capture: capturing NCCL collectives hung (docs/background.md §4).
"""

from __future__ import annotations

import resource
import time
from dataclasses import replace

from ..records.storm import StormRankResult, StormSettings
from ..records.session import Distribution
from .common import barrier, blocking_us, device_event_us, histogram, pipelined_us
from .machines import storm_groups


def run(ctx) -> StormRankResult:
    """The storm through the configured engine(s); with both, the result is torch's with the library's beside it."""
    import torch
    import torch.distributed as dist

    from ..collectives.common import LibraryCall
    from .callers import close_all, open_engines

    s: StormSettings = ctx.settings
    count = max(1, s.bytes // 4)
    buf = torch.zeros(count, dtype=torch.float32, device=ctx.device)  # sums of zeros stay zero
    engines = open_engines(ctx, s.engine, s.shared_device)
    callers = [engine.call(lambda async_op=False: dist.all_reduce(buf, async_op=async_op)) if engine.name == "torch"
               else engine.calls((LibraryCall("all_reduce", count, send=buf, recv=buf, op="sum"),))
               for engine in engines]
    passes = [_Passes(caller) for caller in callers]
    for p in passes:
        p.warm_up(ctx, s)
    for step in (_Passes.pipelined, _Passes.seed_method, _Passes.per_op, _Passes.device):
        for p in passes:
            step(p, ctx, s)
    for p in passes:
        p.check(ctx, buf)
    close_all(engines)
    first, *others = [p.result() for p in passes]
    # across machines: the storm again inside and between them (the torch engine's)
    return replace(first, library=others[0] if others else None, machines=storm_groups(ctx, s))


class _Passes:
    """One engine's storm, pass by pass (each after a barrier, as the module docstring says)."""

    def __init__(self, caller):
        self.caller = caller
        self.op, self.clock = caller.issue, caller.clock
        self.found: dict = {}

    def warm_up(self, ctx, s: StormSettings) -> None:
        self.caller.run(s.warmup)
        ctx.runtime.synchronize()

    def pipelined(self, ctx, s: StormSettings) -> None:
        barrier()
        before = resource.getrusage(resource.RUSAGE_SELF)
        wall0 = time.perf_counter()
        self.found["mean_us"] = pipelined_us(self.op, self.clock, s.iters)
        self.found["storm_wall_s"] = time.perf_counter() - wall0
        after = resource.getrusage(resource.RUSAGE_SELF)
        self.found.update(cpu_user_s=after.ru_utime - before.ru_utime, cpu_system_s=after.ru_stime - before.ru_stime,
                          ctx_switches=(after.ru_nvcsw - before.ru_nvcsw) + (after.ru_nivcsw - before.ru_nivcsw))

    def seed_method(self, ctx, s: StormSettings) -> None:
        import torch.distributed as dist

        barrier()
        t0 = time.time()  # the report's method, kept as it was written
        for _ in range(s.iters):
            self.op()
        dist.barrier()
        self.found["seed_method_us"] = (time.time() - t0) / s.iters * 1e6
        self.clock.synchronize()  # outside the window: the next engine's pass starts on a quiet device

    def per_op(self, ctx, s: StormSettings) -> None:
        barrier()
        self.found["per_op"] = blocking_us(self.op, self.clock, s.per_op_iters)

    def device(self, ctx, s: StormSettings) -> None:
        barrier()
        self.found["device"] = device_event_us(self.op, self.clock, s.per_op_iters)

    def check(self, ctx, buf) -> None:
        """Correctness: the sum of 1..n."""
        buf.fill_(ctx.rank + 1)
        self.caller.run(1)
        ctx.runtime.synchronize()
        expected = ctx.world_size * (ctx.world_size + 1) / 2
        self.found["correct"] = bool((buf == expected).all())

    def result(self) -> StormRankResult:
        """What the passes found, each under its result's field name; the latencies made distributions."""
        found = dict(self.found)
        per_op, device = found.pop("per_op"), found.pop("device")
        return StormRankResult(**found, per_op_us=Distribution.of(per_op), per_op_histogram=histogram(per_op),
                               device_us=Distribution.of(device) if device else None)
