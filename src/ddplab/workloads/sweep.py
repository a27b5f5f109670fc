"""Collective sweep in the nccl-tests manner: every size, out-of-place and in-place where
torch offers both, timed pipelined (default) or blocking, then checked with exact data.

Each size is timed ``repeat`` times after its warmup; each repetition is nccl-tests' own
measurement (``iters`` ops) inside a timed window the launcher's sampler keeps out of
(timed_windows.py). Each rank returns every repetition's time and wall-clock window; the
launcher averages across ranks (nccl-tests `-a 1`), takes the median repetition and sums
the wrong-element counts (measurements/sweep.py). On a shared device rank 0 also measures a
device copy so the launcher can state busbw as a fraction of that ceiling.
"""

from __future__ import annotations

import time
from dataclasses import replace

from .. import collectives, timed_windows
from ..collectives.common import torch_dtype
from ..records.sweep import CopyCeiling, Repetition, SweepRankResult, SweepRankRow, SweepSettings
from .ceiling import copy_gbps
from .common import barrier, time_mode
from .machines import sweep_groups

SUMMARY = "nccl-tests-style sweep of collectives over message sizes"
CEILING_ITERS = 10


def run(ctx) -> SweepRankResult:
    import torch

    s: SweepSettings = ctx.settings
    dtype = torch_dtype(s.dtype)
    elem = torch.tensor([], dtype=dtype).element_size()
    n = ctx.world_size
    rows = []
    for name in s.ops:
        spec = collectives.get(name)
        if n < spec.min_ranks:
            rows.append(SweepRankRow(op=name, skipped=f"needs at least {spec.min_ranks} ranks"))
            continue
        for size in s.sizes:
            count = spec.count_for(size, n, elem)
            if count == 0:
                continue  # smaller than one element per rank: nccl-tests prints nothing either
            for in_place in spec.placements:
                rows.append(_one_row(ctx, spec, count, elem, dtype, in_place, s))
    ceiling = None
    if s.ceiling_bytes and ctx.rank == 0:
        ceiling = CopyCeiling(**copy_gbps(ctx.runtime, s.ceiling_bytes, iters=CEILING_ITERS))
    # across machines: all_reduce again inside and between them
    return SweepRankResult(rows=rows, ceiling=ceiling, machines=sweep_groups(ctx, s))


def _one_row(ctx, spec, count, elem, dtype, in_place, s: SweepSettings) -> SweepRankRow:
    row = SweepRankRow(op=spec.name, size_bytes=count * elem, count=count, in_place=in_place)
    repeats = None
    try:
        prepared = spec.prepare(count, ctx.world_size, ctx.rank, dtype, ctx.device, in_place)
        for _ in range(s.warmup):
            prepared.run()
        ctx.runtime.synchronize()
        repeats = [_repetition(ctx, prepared.run, s) for _ in range(s.repeat)]
        num_wrong = _check(ctx, prepared) if s.check else None
    except Exception as exc:  # e.g. an op the backend lacks: every rank fails alike, the sweep goes on
        return replace(row, repeats=repeats, error=_error_text(exc))
    return replace(row, repeats=repeats, num_wrong=num_wrong)


def _check(ctx, prepared) -> int:
    """Wrong elements after one op on exact data (collectives/common.py)."""
    prepared.fill()
    ctx.runtime.synchronize()
    barrier()
    prepared.run()
    ctx.runtime.synchronize()
    return prepared.wrong()


def _repetition(ctx, run, s: SweepSettings) -> Repetition:
    """One nccl-tests measurement of ``iters`` ops, with its wall-clock window."""
    with timed_windows.timing(ctx.status) as waited_s:
        ctx.runtime.synchronize()
        barrier()
        start = time.time()
        time_us = time_mode(run, ctx.runtime, s.iters, s.mode)
        end = time.time()
    return Repetition(time_us=time_us, window=(start, end), sampler_wait_s=round(waited_s, 6))


def _error_text(exc: Exception) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}"

