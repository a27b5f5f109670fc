"""straggler: the victim is paused (SIGSTOP/SIGCONT) for P ms of every second, a stand-in for network jitter. Run
without and with the pauses under `ddplab launch`'s straggler watch, which must name the victim only with them;
also measured: how much the pauses inflate the OTHER ranks' latency p50 and p99.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace

from ..records.drill import DrillOutcome, Inflation, LatencyComparison, StragglerDetails
from ..records.session import Distribution
from ..records.stragglers import WATCHED, StragglerReport
from ..basics.rundir import RunDir
from ..supervision.job import StragglerPlan
from ..supervision.stragglers import MIN_COLLECTIVES
from . import runner

SUMMARY = "pause one rank P ms every second; ddplab's straggler watch names it, the others' latency inflates"
EXPECT = ("both runs complete, the straggler watch names the victim with the pauses and nobody without (having judged "
          "that run), the others' p99 grows with the pause, nothing is left")
PAUSE_MS = 300  # a pause while the victim waits inside a collective delays no arrival (docs/RESULTS.md)
# 4 times the other drills' host work a step: a few milliseconds of late wake-ups on a busy machine stay a small
# share of a step, where they made the watch name a healthy rank.
STEP_SLEEP_S = 0.04
BASELINE_STEPS = 80  # about 3.5 s: 50 collectives, the least the rule judges, and more
PAUSED_STEPS = 200  # about 12 s with the pauses: enough of them (about 10) for the rule's many waits
WARMUP_COLLECTIVES = 5  # left out of the latencies compared
# The ranks read their recorders every second or two here: a small buffer keeps a read within the watch's budget
# at that pace, and the drill short.
WATCH = StragglerPlan(every_s=1.0)
RANK_ENV = {"TORCH_FR_BUFFER_SIZE": "200"}


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


def named(report: StragglerReport | None) -> list[int]:
    return sorted({f.rank for f in report.findings}) if report else []


def run(ctx: runner.DrillContext) -> DrillOutcome:
    hang = max(ctx.timeout_s, 2 * PAUSE_MS / 1000 + 2)  # a pause is not a hang
    base = runner.observe(ctx, "straggler-baseline", "none", settings=_loop(BASELINE_STEPS),
                          hang_timeout_s=hang, rank_env=RANK_ENV, stragglers=WATCH)
    paused = runner.observe(ctx, "straggler", "none", settings=_loop(PAUSED_STEPS),
                            hang_timeout_s=hang, rank_env=RANK_ENV, stragglers=WATCH,
                            controller=pauser(ctx.victim, ctx.local_count))
    found, baseline_found = paused.session.outcome.stragglers, base.session.outcome.stragglers
    b, p = others_latency(base.outcome, ctx.victim), others_latency(paused.outcome, ctx.victim)
    leaked = sorted(set(base.outcome.leaked_pids) | set(paused.outcome.leaked_pids))
    completed = base.outcome.session.completed and paused.outcome.session.completed
    finding = next((f for f in (found.findings if found else []) if f.rank == ctx.victim), None)
    injected_at = paused.outcome.injected.at if paused.outcome.injected else None
    outcome = replace(paused.outcome, detected_by="ddplab straggler watch" if finding else None,
                      detect_s=round(finding.since - injected_at, 2) if finding and injected_at else None,
                      culprit_ranks=named(found), culprit_reason=finding.line() if finding else
                      (found.summary() if found else "not watched"), leaked_pids=leaked,
                      details=StragglerDetails(pause_ms_per_s=PAUSE_MS, others_latency_us=LatencyComparison(b, p),
                                               inflation=Inflation(*(_ratio(p, b, k) for k in ("p50", "p99", "max"))),
                                               stragglers_named=named(found), baseline_named=named(baseline_found),
                                               stragglers=found))
    return runner.judged(outcome, [
        runner.went_in(paused.outcome), (completed, "a run did not complete"), runner.nothing_left(leaked),
        ((p.p99 or 0) > (b.p99 or 0), f"the others' p99 did not grow ({b.p99} us without pauses, {p.p99} us with)"),
        (named(found) == [ctx.victim], f"the run with pauses named {named(found)}, not [{ctx.victim}]"),
        (judged_enough(baseline_found), "the run without pauses was not judged: "
                                        + (baseline_found.summary() if baseline_found else "no report")),
        (named(baseline_found) == [], f"the run without pauses named {_lines(baseline_found)}")])


def judged_enough(report: StragglerReport | None) -> bool:
    """The watch compared at least the collectives its rule judges: "nobody named" then means something."""
    return report is not None and report.status == WATCHED and (report.collectives or 0) >= MIN_COLLECTIVES


def _loop(steps: int) -> dict:
    return {"steps": steps, "fault_step": -1, "interval": STEP_SLEEP_S}


def _lines(report: StragglerReport | None) -> str:
    return "; ".join(f.line() for f in report.findings) if report else ""


def _ratio(paused: Distribution, baseline: Distribution, key: str) -> float | None:
    before = getattr(baseline, key)
    return getattr(paused, key) / before if before else None
