"""The loopback ceiling (the report's 3.2): how fast this device copies memory.

Device-to-device: ``dst.copy_(src)`` of S bytes timed with device events, reported as copy rate S/t (comparable
with algbw) and memory traffic 2S/t (comparable with the datasheet). Host<->device: pinned host memory, S/t each
way. On the host CPU: host memcpy only.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict

from ..records.ceiling import CeilingRankResult, CeilingSettings, CopyRate, DeviceCopy


def copy_rate(runtime, size_bytes: int, iters: int = 20, src_device=None, dst_device=None) -> CopyRate:
    import torch

    src, dst = (torch.empty(size_bytes, dtype=torch.uint8, device=where or runtime.device,
                            pin_memory=where == "cpu" and not runtime.host_only) for where in (src_device, dst_device))
    src.fill_(1)
    for _ in range(3):
        dst.copy_(src, non_blocking=True)
    runtime.synchronize()
    times_us = []
    for _ in range(iters):
        start, end = runtime.new_event(), runtime.new_event()
        if start is None:  # host: wall clock around a synchronous copy
            t0 = time.perf_counter()
            dst.copy_(src)
            times_us.append((time.perf_counter() - t0) * 1e6)
            continue
        start.record()
        dst.copy_(src, non_blocking=True)
        end.record()
        end.synchronize()
        times_us.append(start.elapsed_time(end) * 1e3)
    t = statistics.median(times_us)
    return CopyRate(size_bytes=size_bytes, time_us=t, gbps=size_bytes / 1e9 / (t * 1e-6),
                    method="host perf_counter per copy" if runtime.host_only else "device events per copy",
                    iters=iters)


def run(ctx) -> CeilingRankResult:
    s: CeilingSettings = ctx.settings
    d2d = copy_rate(ctx.runtime, s.bytes, s.iters)
    device_copy = DeviceCopy(**asdict(d2d), rw_gbps=2 * d2d.gbps)  # every byte read once and written once
    if ctx.runtime.host_only:
        return CeilingRankResult(device_copy)
    return CeilingRankResult(device_copy,
                             host_to_device=copy_rate(ctx.runtime, s.host_bytes, s.iters, src_device="cpu"),
                             device_to_host=copy_rate(ctx.runtime, s.host_bytes, s.iters, dst_device="cpu"))
