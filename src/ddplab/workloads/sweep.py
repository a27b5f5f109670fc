"""Collective sweep in the nccl-tests manner: every size, out-of-place and in-place where torch offers both,
timed pipelined (default) or blocking, then checked with exact data.

Each size is timed ``repeat`` times after its warmup, each repetition nccl-tests' own measurement inside a timed
window the launcher's sampler keeps out of; the launcher averages across ranks and takes the median repetition.
On a shared device rank 0 also measures a device copy, so busbw can be stated as a fraction of that ceiling.
With ``--engine both`` each size's buffers serve both engines, whose repetitions alternate. Before each size the
ranks plan its memory and skip, together, a size the machine cannot hold; after it they free what it left cached.
"""

from __future__ import annotations

from dataclasses import asdict, replace

from .. import collectives
from ..collectives.common import torch_dtype
from ..records.library_engine import TORCH
from ..records.sweep import CopyCeiling, Repetition, SweepRankResult, SweepRankRow, SweepSettings
from .ceiling import copy_rate
from .common import barrier, timed_repetition
from .machines import sweep_groups
from .memory import SizePlanner

CEILING_ITERS = 10


def run(ctx) -> SweepRankResult:
    import torch

    from .callers import close_all, engine_names, open_engines

    s: SweepSettings = ctx.settings
    dtype = torch_dtype(s.dtype)
    elem = torch.tensor([], dtype=dtype).element_size()
    n = ctx.world_size
    engines = open_engines(ctx, s.engine, s.shared_device)
    planner = SizePlanner(ctx, s.memory, torch_engine=TORCH in engine_names(s.engine),
                          pipelined_calls=s.iters if s.mode == "pipelined" else 1)
    rows: list[list[SweepRankRow]] = [[] for _ in engines]  # each engine's rows, in the same order
    for name in s.ops:
        spec = collectives.get(name)
        skipped = (f"needs at least {spec.min_ranks} ranks" if n < spec.min_ranks else
                   "gloo sends device tensors point-to-point from their device address (it stages only collectives): "
                   "not run on a device" if planner.route.staged and not spec.staged_ok else None)
        if skipped:
            for own in rows:
                own.append(SweepRankRow(op=name, skipped=skipped))
            continue
        for size in s.sizes:
            count = spec.count_for(size, n, elem)
            if count == 0:
                continue  # smaller than one element per rank: nccl-tests prints nothing either
            for in_place in spec.placements:
                plan = planner.plan(name, spec.buffers(count, n, in_place), elem)
                row = SweepRankRow(op=spec.name, size_bytes=count * elem, count=count, in_place=in_place)
                measured = ([replace(row, skipped=plan.reason, memory=plan.fit)] * len(engines) if plan.skip
                            else _one_size(ctx, engines, spec, row, dtype, s))
                peak = planner.rss.peak()
                for own, done in zip(rows, measured):
                    own.append(replace(done, host_need_bytes=plan.host_need_bytes,
                                       start_rss_bytes=plan.start_rss_bytes, peak_rss_bytes=peak))
                planner.free()
    close_all(engines)
    ceiling = None
    if s.ceiling_bytes and ctx.rank == 0:
        ceiling = CopyCeiling(**asdict(copy_rate(ctx.runtime, s.ceiling_bytes, iters=CEILING_ITERS)))
    first, *others = rows
    # across machines: all_reduce again inside and between them
    return SweepRankResult(rows=first, ceiling=ceiling, library_rows=others[0] if others else None,
                           machines=sweep_groups(ctx, s))


def _one_size(ctx, engines, spec, row: SweepRankRow, dtype, s: SweepSettings) -> list[SweepRankRow]:
    """One (size, placement) through every engine on the same buffers: warmups, then the repetitions alternating
    between engines (drift on the machine shows in all of them alike), then each engine's check."""
    try:
        prepared = spec.prepare(row.count, ctx.world_size, ctx.rank, dtype, ctx.device, row.in_place)
    except Exception as exc:  # e.g. a size the device cannot hold: every rank fails alike, the sweep goes on
        return [replace(row, error=_error_text(exc)) for _ in engines]
    timings = [_EngineRow(engine, prepared) for engine in engines]
    for t in timings:
        t.attempt(lambda t=t: t.caller.run(s.warmup))
    for _ in range(s.repeat):
        for t in timings:
            t.repetition(ctx, s)
    if s.check:
        for t in timings:
            t.num_wrong = t.attempt(lambda t=t: _check(ctx, t.caller, prepared))
    return [t.row(row, s.repeat) for t in timings]


class _EngineRow:
    """One engine's row of one size: its repetitions, its check, or the first error it met (after which
    it does nothing more; the other engines go on)."""

    def __init__(self, engine, prepared):
        self.repeats: list[Repetition] = []
        self.num_wrong: int | None = None
        self.error: str | None = None
        self.caller = self.attempt(lambda: engine.caller(prepared))

    def attempt(self, step):
        if self.error is not None:
            return None
        try:
            return step()
        except Exception as exc:  # e.g. an op the backend lacks: every rank fails alike, the sweep goes on
            self.error = _error_text(exc)
            return None

    def repetition(self, ctx, s: SweepSettings) -> None:
        repetition = self.attempt(lambda: timed_repetition(ctx, lambda: self.caller.timed(s.iters, s.mode), barrier))
        if repetition is not None:
            self.repeats.append(repetition)

    def row(self, row: SweepRankRow, repeat: int) -> SweepRankRow:
        """The repetitions only when all were timed (an error in the check keeps them)."""
        repeats = self.repeats if len(self.repeats) == repeat else None
        if self.error is not None:
            return replace(row, repeats=repeats, error=self.error)
        return replace(row, repeats=repeats, num_wrong=self.num_wrong)


def _check(ctx, caller, prepared) -> int:
    """Wrong elements after one op on exact data (collectives/common.py)."""
    prepared.fill()
    ctx.runtime.synchronize()
    barrier()
    caller.run(1)
    return prepared.wrong()


def _error_text(exc: Exception) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}"

