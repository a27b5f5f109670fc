"""stall: one rank stops issuing collectives mid-run while the others wait in one.

Run twice where the backend has a blocking-wait setting: with its default error handling (NCCL: the watchdog
aborts the waiting ranks, long after the timeout) and with blocking wait; once with gloo, whose waits always block.
ddplab names the rank that entered fewer collectives, not the first rank to die (which torchrun blames).
"""

from __future__ import annotations

from dataclasses import replace

from ..records.drill import BlockingWaitHandling, DrillOutcome, StallDetails, StallHandling
from . import runner

SUMMARY = "one rank stops issuing collectives; default handling and blocking wait"
EXPECT = ("each run (one where waits always block) detected within timeout + 5 s, the stalled rank named, no process "
          "left")


def run(ctx: runner.DrillContext) -> DrillOutcome:
    spec = ctx.platform.spec  # the vendor's knob only where its library runs (gloo on a device ignores it)
    knob = spec.blocking_wait_env if ctx.placement.backend == spec.backend else None
    default = runner.observe(ctx, "stall", "stall").outcome
    # Without such a setting (gloo) the default run is the blocking-wait run: a second one would repeat it
    blocking = runner.observe(ctx, "stall-blocking-wait", "stall", rank_env={knob: "1"}).outcome if knob else default
    details = StallDetails(
        default_handling=StallHandling(default.detected_by, default.detect_s, default.culprit_ranks,
                                       default.error_excerpt),
        blocking_wait=BlockingWaitHandling(blocking.detected_by, blocking.detect_s, blocking.culprit_ranks,
                                           blocking.error_excerpt, leaked_pids=blocking.leaked_pids,
                                           blocking_wait_env=f"{knob}=1" if knob
                                           else _no_knob(ctx.placement.backend)))
    # The default run's outcome stands for the drill; the blocking-wait run's is in the details.
    missed = [*(default.failed_because or []),
              *(f"under blocking wait: {why}" for why in (blocking.failed_because or []) if blocking is not default)]
    return runner.with_missed(replace(default, details=details,
                                      leaked_pids=sorted(set(default.leaked_pids) | set(blocking.leaked_pids))),
                              missed)


def _no_knob(backend: str) -> str:
    why = "gloo waits are always blocking" if backend == "gloo" else f"{backend} has no such setting"
    return f"none ({why}: the default run is this run, not run twice)"
