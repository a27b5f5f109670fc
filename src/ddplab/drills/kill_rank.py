"""kill_rank: SIGKILL one rank while every rank is busy issuing collectives.

Expected: the launcher notices the death and tears the others down; ddplab names the
killed rank; nothing is left running and device memory comes back.
"""

import signal

from .common import judge, kill_when_running, run_inprocess

SUMMARY = "SIGKILL one rank mid-collective"
EXPECT = "the group is torn down within timeout + 5 s, the killed rank is named, no process is left"


def run(opts, console=None) -> dict:
    out = run_inprocess("kill_rank", opts, "none", console,
                        controller_factory=kill_when_running(signal.SIGKILL, "SIGKILL to the rank"))
    out["verdict"] = judge(out, opts.victim, opts.timeout_s, out["device_mem_before_bytes"] is not None)
    return out
