"""The time-slicing tax: K processes running the same compute kernel on one device.

Phase 1: rank 0 runs a matmul loop alone for ``seconds`` while the others wait at a
barrier. Phase 2: every rank runs it at the same time for ``seconds``. Each rank counts
finished matmuls in its window (device synchronised every batch) and reports TFLOP/s.
Aggregate efficiency = sum of phase-2 rates / phase-1 rate; per-process slowdown =
phase-1 rate / own phase-2 rate. A fixed window, not a fixed count, keeps all K busy
for the whole measurement.
"""

from __future__ import annotations

import time

from .common import barrier

SUMMARY = "K processes computing on one device vs one alone: efficiency and slowdown"


def _rate_tflops(ctx, a, b, seconds: float, batch: int) -> dict:
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
    return {"matmuls": done, "elapsed_s": elapsed, "tflops": done * flops_per / elapsed / 1e12}


def run(ctx) -> dict:
    import torch

    s = ctx.settings
    dtype = torch.float32 if ctx.runtime.is_host else torch.bfloat16
    g = torch.Generator(device="cpu").manual_seed(ctx.rank)
    a = torch.randn(s["size"], s["size"], generator=g).to(ctx.device, dtype)
    b = torch.randn(s["size"], s["size"], generator=g).to(ctx.device, dtype)
    for _ in range(3):
        a @ b
    ctx.runtime.synchronize()
    barrier()
    solo = _rate_tflops(ctx, a, b, s["seconds"], s["batch"]) if ctx.rank == 0 else None
    barrier()
    together = _rate_tflops(ctx, a, b, s["seconds"], s["batch"])
    barrier()
    return {"solo": solo, "together": together, "matrix": s["size"], "dtype": str(dtype).replace("torch.", "")}
