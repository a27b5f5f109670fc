"""The engines a rank times a collective through, on the same buffers and with the same helpers.

- torch: torch.distributed, the report's own method;
- library: the collective library called directly through the vendor's binding, its calls bound once to the
  buffers a collective's ``prepare`` made (``Prepared.library``); the communicator stands where the timing
  helpers take a runtime.

A ``Caller`` is one collective bound to one engine: ``issue()`` makes one call, ``clock`` waits for the calls
(and makes device events), ``ready()`` orders the engine's calls after what torch queued on the device,
``timed(iters, mode)`` is one nccl-tests measurement. Engines in one rank are timed back to back on the same
buffers (``--engine both``), so their difference is what the framework adds.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

from ..platform.library_engine import BOTH
from ..records.library_engine import LIBRARY, TORCH
from .common import pipelined_us, time_mode


def engine_names(engine: str) -> tuple[str, ...]:
    """The engines one setting times, torch first (the report's own method)."""
    return (TORCH, LIBRARY) if engine == BOTH else (engine,)


@dataclass(frozen=True)
class Caller:
    issue: Callable[[], object]
    clock: object  # synchronize(); new_event()
    ready: Callable[[], None]
    timed: Callable[[int, str], float]  # (iters, mode) -> us per call

    def run(self, calls: int) -> None:
        """Untimed: after the buffers' fill, ``calls`` calls, waited for (a warmup, or the call a check reads)."""
        self.ready()
        for _ in range(calls):
            self.issue()
        self.clock.synchronize()


def _nothing() -> None:
    """torch orders its own calls after the buffers' fill (one stream)."""


class TorchEngine:
    name = TORCH

    def __init__(self, runtime):
        self.runtime = runtime

    def caller(self, prepared) -> Caller:
        return self.call(prepared.run)

    def call(self, run: Callable[..., object]) -> Caller:
        """``run(async_op=False)``: a collective's own call, or a workload's (the storm's all_reduce)."""
        return Caller(run, self.runtime, _nothing, partial(time_mode, run, self.runtime))

    def close(self) -> None:
        pass


class LibraryEngine:
    name = LIBRARY

    def __init__(self, comm):
        self.comm = comm

    def caller(self, prepared) -> Caller:
        return self.calls(prepared.library)

    def calls(self, library_calls) -> Caller:
        issue = self.comm.bind(library_calls)
        timed = partial(time_mode, issue, self.comm, pipelined=pipelined_us)  # no work handles: N calls, one wait
        return Caller(issue, self.comm, self.comm.follow_framework, timed)

    def close(self) -> None:
        self.comm.close()


def open_engines(ctx, engine: str, shared_device: bool) -> list:
    """The rank's engines for ``engine`` (engines.ENGINES), torch first. Collective: every rank calls it."""
    return [TorchEngine(ctx.runtime) if name == TORCH else open_library(ctx, shared_device)
            for name in engine_names(engine)]


def open_library(ctx, shared_device: bool) -> LibraryEngine:
    """The binding the launcher checked and a communicator over the world group on this rank's device."""
    from ..platform import detect
    from ..platform.library_binding import open_binding

    runtime = ctx.runtime
    binding = open_binding(detect(runtime.device_type, with_memory=False))
    return LibraryEngine(binding.communicator(device_index=None if runtime.host_only else runtime.index,
                                              shared_device=shared_device))


def close_all(engines: list) -> None:
    for engine in engines:
        engine.close()
