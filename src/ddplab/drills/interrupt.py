"""interrupt: SIGINT to a running ddplab launcher (the report's Ctrl+C).

The launcher is a separate `ddplab train` process, sent SIGINT once every rank runs (child_launcher.signal_train).
"""

from __future__ import annotations

import signal

from ..records.drill import DrillOutcome
from . import child_launcher, runner

SUMMARY = "SIGINT (Ctrl+C) to the launcher"
EXPECT = "every rank gone within timeout + 5 s, the launcher still writes a report, nothing left"


def run(ctx: runner.DrillContext) -> DrillOutcome:
    out = child_launcher.signal_train(ctx, signal.SIGINT, "launcher teardown")
    return runner.judged(out, [runner.went_in(out), runner.detected_in_time(out.detected_by, out.detect_s,
                                                                             ctx.timeout_s),
                               runner.nothing_left(out.leaked_pids),
                               (out.details.report_written, "the launcher wrote no report")])
