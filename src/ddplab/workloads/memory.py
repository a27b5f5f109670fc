"""The rank's side of memory planning (platform/memory_plan.py), for a workload that allocates size after size.

Before each size every rank reads the machine (after a barrier), plans the size for all the ranks of its machine
and of its device, and the ranks agree: one rank that cannot hold a size skips it for all (a size run by some
ranks only would hang the others). After each size every rank hands back what it left cached and says its RSS
when the size began and its peak while it ran.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..collectives.common import Buffers
from ..platform.memory_plan import PeakRss, Route, collective_need, judge, read_machine, release
from ..records.memory import MemoryFit, MemoryShare
from .common import barrier

OTHER_RANK = "another rank found too little memory for it (its row says why)"


@dataclass(frozen=True)
class SizePlan:
    """One size as planned on this rank: its own fit, whether the ranks agreed to skip it, its RSS at the start."""

    fit: MemoryFit
    host_need_bytes: int
    skip: bool
    start_rss_bytes: int | None

    @property
    def reason(self) -> str:
        return (self.fit.reason or OTHER_RANK) if self.skip else ""


class SizePlanner:
    """Plans, frees and measures the sizes of one rank (workloads/sweep.py asks it before and after each size)."""

    def __init__(self, ctx, share: MemoryShare | None, torch_engine: bool, pipelined_calls: int):
        import torch.distributed as dist

        self.ctx = ctx
        local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        self.share = share or MemoryShare(local, local)
        # Only the torch engine goes through the process group's backend; the library engine's calls stage nothing.
        self.route = Route.of(dist.get_backend() if torch_engine else "library", ctx.runtime.host_only)
        self.pipelined_calls = pipelined_calls
        self.rss = PeakRss()

    def plan(self, op: str, buffers: Buffers, elem: int) -> SizePlan:
        """Every rank calls it for the same size: a barrier and one small all_reduce."""
        need = collective_need(op, buffers, elem, self.route, in_flight=self.pipelined_calls)
        barrier()
        start = self.rss.reset()
        fit = judge(need, read_machine(self.ctx.runtime), self.share.ranks_on_machine, self.share.ranks_on_device,
                    host_only=self.route.host_only)
        return SizePlan(fit, need.host_bytes, self._anyone_short(fit), start)

    def free(self) -> None:
        """After a size: hand back what it left cached before the next one is planned. Where gloo stages device
        tensors through the host, only the device allocator's cache, after a barrier: gloo failed with "writev: Bad
        address" right after the pinned cache was emptied (the cause found later was gloo's send/recv, now skipped
        there); until emptying it again is proven on a GPU, the staged sizes stay capped (lab/profiles.py)."""
        if self.route.staged:
            barrier()  # every message sent before it has been taken
            self.ctx.runtime.release_caches(host=False)
            return
        release(self.ctx.runtime, staged=False)

    def _anyone_short(self, fit: MemoryFit) -> bool:
        import torch
        import torch.distributed as dist

        if self.ctx.world_size == 1:
            return not fit.fits
        flag = torch.tensor([0.0 if fit.fits else 1.0], device=self.ctx.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item() > 0)
