"""The time-slicing tax: K processes running the same compute kernel on one device.

Phase 1: rank 0 runs a matmul loop alone for ``seconds`` while the others wait at a
barrier. Phase 2: every rank runs it at the same time for ``seconds``. Each rank counts
finished matmuls in its window (device synchronised every batch) and reports TFLOP/s.
A fixed window, not a fixed count, keeps all K busy for the whole measurement.

Efficiency = sum of phase-2 rates / the ideal aggregate; per-process slowdown = phase-1
rate / own phase-2 rate. The ideal aggregate depends on what the K processes share:
  device  one accelerator: time slicing can at best keep it as busy as one process did,
          so the ideal is the solo rate (the report's section 3.2).
  cores   the host CPU: K processes of T threads each run side by side on C usable cores,
          so the ideal is min(K x T, C) / min(T, C) x the solo rate (min(K, C) x solo for
          single-threaded ranks); "195.8% of one process alone" on 2 cores meant nothing.
On the host the number is informational: the cores are shared with whatever else the
machine runs. ``judge`` is the one rule for the verdict, used by the command and by the
lab's check row alike.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

from .common import barrier

SUMMARY = "K processes computing on one device vs one alone: efficiency and slowdown"
EFFICIENCY_WARN = 0.80  # below this aggregate efficiency, time slicing costs more than it should
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


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
    return {"solo": solo, "together": together, "matrix": s["size"], "dtype": str(dtype).replace("torch.", ""),
            "threads": torch.get_num_threads(), "usable_cores": usable_cores()}


def usable_cores() -> int | None:
    """Cores this process may run on: its CPU affinity, lowered by a cgroup v2 CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count()
    quota = cgroup_quota_cores(_read(CGROUP_CPU_MAX))
    return min(cores, quota) if cores and quota else cores


def cgroup_quota_cores(cpu_max: str | None) -> int | None:
    """cgroup v2 cpu.max ("max 100000" or "150000 100000") as whole cores, rounded up; None = no quota."""
    parts = (cpu_max or "").split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        return max(1, math.ceil(int(parts[0]) / int(parts[1])))
    except (ValueError, ZeroDivisionError):
        return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def ideal_factor(host: bool, nproc: int, threads: int, cores: int | None) -> float | None:
    """How many times one process's rate the K processes could reach together (None: unknown)."""
    if not host:
        return 1.0
    if not cores:
        return None
    return min(nproc * threads, cores) / min(threads, cores)


def summarise(solo_tflops: float, together_tflops: list[float], host: bool, threads: int,
              cores: int | None) -> dict:
    """Efficiency against the ideal aggregate, with the basis it was judged on."""
    k = len(together_tflops)
    factor = ideal_factor(host, k, threads, cores)
    aggregate = sum(together_tflops)
    if host:
        method = (f"ideal aggregate on the host CPU = min(K x threads, usable cores) / min(threads, usable cores) "
                  f"x the solo rate = min({k} x {threads}, {cores}) / min({threads}, {cores}) x solo")
    else:
        method = "ideal aggregate on one device = the solo rate (time slicing shares one device)"
    return {
        "ideal_basis": "cores" if host else "device",
        "usable_cores": cores,
        "threads_per_process": threads,
        "ideal_factor": factor,
        "ideal_aggregate_tflops": None if factor is None else factor * solo_tflops,
        "aggregate_tflops": aggregate,
        "aggregate_over_solo": aggregate / solo_tflops,
        "efficiency": None if factor is None else aggregate / (factor * solo_tflops),
        "efficiency_method": method,
        "slowdown": [solo_tflops / r for r in together_tflops],
    }


def judge(results: dict) -> tuple[str, str, str]:
    """(verdict, threshold, note): the one rule for contention, for the command and the check row.

    Results written before the ideal had a basis were all measured against the solo rate
    and are judged as on a device."""
    efficiency = results.get("efficiency")
    if efficiency is None:
        return "warn", "n/a", (f"efficiency not computed: usable cores unknown on this host "
                               f"(ideal_basis {results.get('ideal_basis')})")
    if results.get("ideal_basis") == "cores":
        return "pass", "informational on the host", ("the host's cores are shared with everything else it "
                                                     "runs; only an accelerator's time slicing is judged")
    threshold = f">= {100 * EFFICIENCY_WARN:.0f}%"
    if efficiency < EFFICIENCY_WARN:
        return "warn", threshold, "time slicing is expensive here: use the sharing daemon (--mps)"
    return "pass", threshold, "none"
