"""straggler: the victim is paused (SIGSTOP/SIGCONT) for P ms of every second, a stand-in
for network jitter. Measured twice, without and with the pauses: the latency p50 and p99
of every collective the OTHER ranks issued, and how much the pauses inflate them.
"""

import os
import signal
import time

from ..workloads.common import distribution
from .common import fault_injected, run_inprocess, wait_for_pids

SUMMARY = "pause one rank P ms every second; latency inflation seen by the others"
EXPECT = "both runs complete, the others' p99 grows with the pause, nothing is left"
PAUSE_MS = 200
STEPS = 150


def _pauser(injected: dict, opts):
    def control(run):
        if not wait_for_pids(run.path, opts.nproc):
            return
        pid = run.rank_pids().get(opts.victim)
        try:
            while True:
                paused_at = time.time()
                os.kill(pid, signal.SIGSTOP)
                injected.setdefault("at", paused_at)  # recorded once the first pause really happened
                injected.setdefault("what", f"SIGSTOP for {PAUSE_MS} ms every second")
                time.sleep(PAUSE_MS / 1000)
                os.kill(pid, signal.SIGCONT)
                time.sleep(1 - PAUSE_MS / 1000)
        except ProcessLookupError:
            return
    return control


def _others(out: dict, victim: int) -> dict:
    values = [t for rank, lat in out["latencies"].items() if int(rank) != victim and lat for t in lat[5:]]
    return distribution(values)


def run(opts, console=None) -> dict:
    settings = {"steps": STEPS, "inject_at": -1}
    hang = max(opts.timeout_s, 2 * PAUSE_MS / 1000 + 2)  # a pause is not a hang
    base = run_inprocess("straggler-baseline", opts, "none", console, settings=settings, hang_timeout_s=hang)
    paused = run_inprocess("straggler", opts, "none", console, settings=settings, controller_factory=_pauser,
                           hang_timeout_s=hang)
    b, p = _others(base, opts.victim), _others(paused, opts.victim)
    out = dict(paused)
    out.update(detected_by="latency inflation (not a failure)", detect_s=None,
               pause_ms_per_s=PAUSE_MS, others_latency_us={"baseline": b, "paused": p},
               inflation={k: (p[k] / b[k] if b.get(k) else None) for k in ("p50", "p99", "max")})
    out["leaked_pids"] = sorted(set(base["leaked_pids"]) | set(paused["leaked_pids"]))
    completed = base["session"]["completed"] and paused["session"]["completed"]
    out["verdict"] = "pass" if (fault_injected(paused) and completed and not out["leaked_pids"]
                                and p.get("p99", 0) > b.get("p99", 0)) else "fail"
    return out
