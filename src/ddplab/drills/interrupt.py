"""interrupt: SIGINT to a running ddplab launcher (the report's Ctrl+C).

The launcher is a separate `ddplab train` process, sent SIGINT once every rank runs (child_launcher.signal_train).
"""

from __future__ import annotations

import signal
from dataclasses import replace

from ..records.core import Verdict
from ..records.drill import DrillOutcome
from . import child_launcher, runner

SUMMARY = "SIGINT (Ctrl+C) to the launcher"
EXPECT = "every rank gone within timeout + 5 s, the launcher still writes a report, nothing left"


def run(ctx: runner.DrillContext) -> DrillOutcome:
    out = child_launcher.signal_train(ctx, signal.SIGINT, "launcher teardown")
    ok = (out.fault_went_in and runner.detected_within(out.detect_s, ctx.timeout_s) and not out.leaked_pids
          and out.details.report_written)
    return replace(out, verdict=Verdict.PASS if ok else Verdict.FAIL)
