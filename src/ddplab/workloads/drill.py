"""What ranks run during a fault drill: a steady loop of small all_reduces, reporting each
collective to the status file, with the fault injected by the victim rank itself for
the drills that need it (late, stall, desync, oom). Kills, Ctrl+C and pauses come from
the launcher side (ddplab/drills), not from here.

Every rank returns the latency of each of its collectives, so a drill can show what the
others saw (straggler: p50/p99 inflation).
"""

from __future__ import annotations

import time

from ..records.drill import DrillRankResult, DrillSettings

SUMMARY = "fault-drill loop: all_reduces with an injected fault on one rank"


def before_init(ctx) -> None:
    s: DrillSettings = ctx.settings
    if s.fault == "late" and ctx.rank == s.victim:
        ctx.status.phase("before-init", injected="sleep before init_process_group", injected_at=time.time())
        time.sleep(s.late_s)


def run(ctx) -> DrillRankResult:
    import torch
    import torch.distributed as dist

    s: DrillSettings = ctx.settings
    victim = ctx.rank == s.victim  # both global ranks
    buf = torch.ones(s.numel, dtype=torch.float32, device=ctx.device)
    latencies_us = []
    for k in range(s.steps):
        if victim and k == s.inject_at:
            _inject(ctx, s)
        op, numel = "all_reduce", s.numel
        if victim and s.fault == "desync" and k >= s.inject_at:
            op, numel = "broadcast", 2 * s.numel
            buf = torch.ones(numel, dtype=torch.float32, device=ctx.device)
        ctx.status.enter_collective(op, numel)
        t0 = time.perf_counter()
        if op == "broadcast":
            dist.broadcast(buf, src=0)
        else:
            dist.all_reduce(buf)
        ctx.runtime.synchronize()
        latencies_us.append((time.perf_counter() - t0) * 1e6)
        ctx.status.leave_collective()
        buf.fill_(1.0)
        time.sleep(s.interval_s)
    return DrillRankResult(latencies_us=latencies_us)


def _inject(ctx, s: DrillSettings) -> None:
    if s.fault == "stall":
        ctx.status.phase("stalled", injected="stopped issuing collectives", injected_at=time.time())
        time.sleep(s.stall_s)
    elif s.fault == "desync":
        ctx.status.phase("running", injected="switched to broadcast of twice the size", injected_at=time.time())
    elif s.fault == "oom":
        import torch

        cap = ctx.runtime.allocator_cap_bytes()
        ctx.status.phase("running", injected=f"allocating {cap + (1 << 30)} bytes against a cap of {cap}",
                         injected_at=time.time())
        if ctx.runtime.is_host:
            _host_oom(cap)
        torch.empty(cap + (1 << 30), dtype=torch.uint8, device=ctx.device)


def _host_oom(cap: int) -> None:
    """The host has no allocator cap: impose one on this process's address space, then exceed it."""
    import resource

    import torch

    with open("/proc/self/statm") as f:
        vm_bytes = int(f.read().split()[0]) * resource.getpagesize()
    previous = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (vm_bytes + cap, previous[1]))
    try:
        torch.empty(cap + (1 << 30), dtype=torch.uint8)
    except RuntimeError as exc:
        resource.setrlimit(resource.RLIMIT_AS, previous)  # let the rest of the rank report the failure
        raise MemoryError(f"out of memory: tried to allocate {cap + (1 << 30)} bytes over this rank's cap of "
                          f"{cap} bytes ({exc})") from exc
