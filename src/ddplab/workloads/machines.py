"""Rank side of a job across machines: the ranks tell each other where they run, repeat a measurement on
groups of ranks (the whole job, each machine, one rank per machine, machine pairs) and gather everything, so
that every launcher gets the whole job back, not only its own ranks.

Groups run in batches: the groups of one batch share no rank and run at once; every rank meets at a barrier
after each batch, so no batch disturbs another. Each comparison group is a batch of its own, with the same
settings, so their numbers compare. Every rank creates every group (new_group is collective); only the members
measure, and each group is destroyed after its batch (else a pairwise test keeps a communicator per pair).

The waiting ranks meet at a barrier of a group whose timeout is long (``MEETING_TIMEOUT_S``): a batch may take
longer than the process-group timeout, and they must not give up before the members are done. The members keep
the process-group timeout, and a group stops at its first error (else a broken link costs a timeout per size).
"""

from __future__ import annotations

import os
import socket
from datetime import timedelta
from typing import Any, Callable, Mapping

from ..cluster.topology import comparison_groups, pair_groups
from ..collectives.common import count_wrong, reduce_values, torch_dtype
from ..cluster.exposure import NODE_ADDRESS_ENV
from ..records.machines import WHOLE_JOB, GatheredJob, Group, GroupResult, RankPlace
from ..records.storm import StormSettings
from ..records.sweep import SweepRankRow, SweepSettings
from .common import pipelined_us, time_mode, timed_repetition

Measure = Callable[[Any, Group], Any]  # (process group handle, group) -> what this member measured
MEETING_TIMEOUT_S = 24 * 3600.0


def several_launchers(world_size: int, environ: Mapping[str, str] = os.environ) -> bool:
    """The job spans more than this launcher's ranks (elastic's LOCAL_WORLD_SIZE, as torchrun sets it too)."""
    local = environ.get("LOCAL_WORLD_SIZE", "")
    return local.isdigit() and int(local) < world_size


def this_machine(environ: Mapping[str, str] = os.environ) -> str:
    """This rank's machine: the address its launcher uses toward the endpoint, else the hostname."""
    return environ.get(NODE_ADDRESS_ENV) or socket.gethostname()


def gather_places(ctx) -> list[RankPlace]:
    mine = RankPlace(ctx.rank, ctx.local_rank, this_machine(), socket.gethostname())
    return sorted(gather_objects(mine, ctx.device), key=lambda p: p.rank)


def job_places(ctx) -> GatheredJob | None:
    """Every rank and its machine, when the job spans several launchers (else None: nothing to gather)."""
    if not several_launchers(ctx.world_size):
        return None
    return GatheredJob(gather_places(ctx))


def in_comparison_groups(ctx, measure: Measure) -> GatheredJob | None:
    """``measure`` again on each comparison group, one group at a time (None on one launcher)."""
    if not several_launchers(ctx.world_size):
        return None
    places = gather_places(ctx)
    return run_in_groups(ctx, places, [[g] for g in comparison_groups(_hosts(places))], measure)


def storm_groups(ctx, settings: StormSettings) -> GatheredJob | None:
    """The storm's pipelined mean again on each comparison group (None on one launcher)."""
    if not several_launchers(ctx.world_size):
        return None  # before the buffer: a storm's may be large
    import torch
    import torch.distributed as dist

    buf = torch.zeros(max(1, settings.bytes // 4), dtype=torch.float32, device=ctx.device)

    def measure(handle, group: Group) -> float:
        def op():
            dist.all_reduce(buf, group=handle)

        for _ in range(settings.warmup):
            op()
        ctx.runtime.synchronize()
        dist.barrier(group=handle)
        return pipelined_us(op, ctx.runtime, settings.iters)

    return in_comparison_groups(ctx, measure)


def sweep_groups(ctx, settings: SweepSettings) -> GatheredJob | None:
    """all_reduce at the sweep's sizes again on each comparison group (None on one launcher)."""
    return in_comparison_groups(ctx, lambda handle, group: all_reduce_rows(ctx, handle, group, settings))


def pair_rounds(ctx, settings: SweepSettings) -> GatheredJob:
    """all_reduce at the given sizes between every pair of machines, the pairs of a round at once."""
    places = gather_places(ctx)
    return run_in_groups(ctx, places, pair_groups(_hosts(places)),
                         lambda handle, group: all_reduce_rows(ctx, handle, group, settings))


def run_in_groups(ctx, places: list[RankPlace], batches: list[list[Group]], measure: Measure) -> GatheredJob:
    """Run ``measure`` on every group's members, batch after batch; gather every rank's results."""
    import torch.distributed as dist

    mine: list[GroupResult] = []
    rounds: list[list[int]] = []
    index = 0
    meeting = dist.new_group(list(range(ctx.world_size)), timeout=timedelta(seconds=MEETING_TIMEOUT_S))
    for batch in batches:
        handles = [None if g.scope == WHOLE_JOB else dist.new_group(g.ranks) for g in batch]
        rounds.append(list(range(index, index + len(batch))))
        for group, handle in zip(batch, handles):
            if ctx.rank in group.ranks:
                mine.append(GroupResult(index, ctx.rank, measure(handle, group)))
            index += 1
        dist.barrier(group=meeting)
        for group, handle in zip(batch, handles):
            if handle is not None and ctx.rank in group.ranks:
                dist.destroy_process_group(handle)
    dist.destroy_process_group(meeting)
    gathered = [r for results in gather_objects(mine, ctx.device) for r in results]
    return GatheredJob(places, [g for batch in batches for g in batch], gathered, rounds)


def all_reduce_rows(ctx, handle, group: Group, s: SweepSettings) -> list[SweepRankRow]:
    """One all_reduce row per size on ``group``, timed and checked as the sweep's own rows are."""
    import torch

    dtype = torch_dtype(s.dtype)
    elem = torch.tensor([], dtype=dtype).element_size()
    rows = []
    for size in s.sizes:
        if size // elem:
            rows.append(_row(ctx, handle, group, size // elem, elem, dtype, s))
            if rows[-1].error:
                break  # the group is broken: one error says so, the next sizes would each wait a timeout
    return rows


def _row(ctx, handle, group: Group, count: int, elem: int, dtype, s: SweepSettings) -> SweepRankRow:
    import torch.distributed as dist

    row = dict(op="all_reduce", size_bytes=count * elem, count=count, in_place=True)
    buf = reduce_values(ctx.rank, 0, count, dtype, ctx.device)

    def run(async_op=False):
        return dist.all_reduce(buf, group=handle, async_op=async_op)

    repeats = None
    try:
        for _ in range(s.warmup):
            run()
        ctx.runtime.synchronize()
        repeats = [timed_repetition(ctx, lambda: time_mode(run, ctx.runtime, s.iters, s.mode),
                                    lambda: dist.barrier(group=handle)) for _ in range(s.repeat)]
        num_wrong = None
        if s.check:
            buf.copy_(reduce_values(ctx.rank, 0, count, dtype, ctx.device))
            dist.barrier(group=handle)
            run()
            ctx.runtime.synchronize()
            num_wrong = count_wrong(buf, sum(reduce_values(r, 0, count, dtype, ctx.device) for r in group.ranks))
    except Exception as exc:  # a broken pair is a finding, not the end of the test (every member fails alike)
        return SweepRankRow(**row, repeats=repeats, error=f"{type(exc).__name__}: {str(exc).strip()[:300]}")
    return SweepRankRow(**row, repeats=repeats, num_wrong=num_wrong)


def _hosts(places: list[RankPlace]) -> dict[int, str]:
    return {p.rank: p.machine for p in places}


def gather_objects(obj, device) -> list:
    """Every rank's ``obj``, on every rank: its pickle, padded to the longest, through two all_gathers (not
    all_gather_object: that needs numpy, which torch does not install)."""
    import ctypes
    import pickle

    import torch
    import torch.distributed as dist

    if dist.get_backend() == "gloo":
        device = "cpu"  # gloo takes host tensors
    data = pickle.dumps(obj)
    sizes = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, torch.tensor([len(data)], dtype=torch.int64, device=device))
    longest = max(int(s.item()) for s in sizes)
    mine = torch.zeros(longest, dtype=torch.uint8, device=device)
    mine[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(device)
    everyone = [torch.empty_like(mine) for _ in sizes]
    dist.all_gather(everyone, mine)
    out = []
    for size, tensor in zip(sizes, everyone):
        host = tensor.cpu().contiguous()
        out.append(pickle.loads(ctypes.string_at(host.data_ptr(), int(size.item()))))
    return out
