"""straggler: the victim is paused (SIGSTOP/SIGCONT) for P ms of every second, a stand-in
for network jitter. Measured twice, without and with the pauses: the latency p50 and p99
of every collective the OTHER ranks issued, and how much the pauses inflate them.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace

from ..records.core import Verdict
from ..records.drill import DrillOutcome, Inflation, LatencyComparison, StragglerDetails
from ..records.session import Distribution
from ..rundir import RunDir
from . import runner

SUMMARY = "pause one rank P ms every second; latency inflation seen by the others"
EXPECT = "both runs complete, the others' p99 grows with the pause, nothing is left"
PAUSE_MS = 200
STEPS = 150
WARMUP_COLLECTIVES = 5  # left out of the latencies compared


def pauser(victim: int, local_count: int) -> runner.Controller:
    """SIGSTOP the victim for PAUSE_MS of every second until it is gone (only where it runs on this machine)."""
    def control(run: RunDir, injections: runner.Injections) -> None:
        pid = runner.wait_for_ranks(run, local_count).get(victim)
        if pid is None:
            return
        try:
            while True:
                paused_at = time.time()
                os.kill(pid, signal.SIGSTOP)
                injections.record(f"SIGSTOP for {PAUSE_MS} ms every second", paused_at)  # once it really happened
                time.sleep(PAUSE_MS / 1000)
                os.kill(pid, signal.SIGCONT)
                time.sleep(1 - PAUSE_MS / 1000)
        except ProcessLookupError:
            return
    return control


def others_latency(outcome: DrillOutcome, victim: int) -> Distribution:
    """Every collective the ranks other than the victim timed, after the first few."""
    return Distribution.of([t for rank, lat in (outcome.latencies or {}).items() if rank != victim and lat
                            for t in lat[WARMUP_COLLECTIVES:]])


def run(ctx: runner.DrillContext) -> DrillOutcome:
    settings = {"steps": STEPS, "fault_step": -1}
    hang = max(ctx.timeout_s, 2 * PAUSE_MS / 1000 + 2)  # a pause is not a hang
    base = runner.observe(ctx, "straggler-baseline", "none", settings=settings, hang_timeout_s=hang).outcome
    paused = runner.observe(ctx, "straggler", "none", settings=settings, hang_timeout_s=hang,
                            controller=pauser(ctx.victim, ctx.local_count)).outcome
    b, p = others_latency(base, ctx.victim), others_latency(paused, ctx.victim)
    leaked = sorted(set(base.leaked_pids) | set(paused.leaked_pids))
    completed = base.session.completed and paused.session.completed
    ok = paused.fault_went_in and completed and not leaked and (p.p99 or 0) > (b.p99 or 0)
    return replace(paused, detected_by="latency inflation (not a failure)", detect_s=None, leaked_pids=leaked,
                   verdict=Verdict.PASS if ok else Verdict.FAIL,
                   details=StragglerDetails(pause_ms_per_s=PAUSE_MS, others_latency_us=LatencyComparison(b, p),
                                            inflation=Inflation(*(_ratio(p, b, k) for k in ("p50", "p99", "max")))))


def _ratio(paused: Distribution, baseline: Distribution, key: str) -> float | None:
    before = getattr(baseline, key)
    return getattr(paused, key) / before if before else None
