"""interrupt: SIGINT to a running ddplab launcher (the report's Ctrl+C).

The launcher is a separate `ddplab train` process; the drill sends it SIGINT once every
rank is running, then measures how long the ranks take to disappear, whether the launcher
still wrote its report, and what is left.
"""

import signal

from .common import fault_injected, signal_child_launcher

SUMMARY = "SIGINT (Ctrl+C) to the launcher"
EXPECT = "every rank gone within timeout + 5 s, the launcher still writes a report, nothing left"


def run(opts, console=None) -> dict:
    out = signal_child_launcher("interrupt", opts, signal.SIGINT, console)
    out["verdict"] = "pass" if (fault_injected(out)
                                and out["detect_s"] is not None and out["detect_s"] <= opts.timeout_s + 5
                                and not out["leaked_pids"] and out["report_written"]) else "fail"
    return out
