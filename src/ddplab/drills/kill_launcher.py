"""kill_launcher: SIGKILL the launcher, which can catch nothing.

--launcher ddplab (default): every rank's parent-death guard fires; no rank survives.
--launcher torchrun: plain torchrun, for comparison. Its workers lead their own sessions
and keep running with parent 1, holding device memory (measured.md). The drill then
proves `ddplab clean` finds exactly those orphans, ends them, and the memory comes back.
"""

import signal

from .common import fault_injected, signal_child_launcher, torchrun_orphans

SUMMARY = "SIGKILL the launcher (ddplab's, or plain torchrun's for comparison)"
EXPECT = ("ddplab: no rank survives 3 s later. torchrun: orphans remain, and ddplab clean removes exactly "
          "them and the memory comes back")


def run(opts, console=None) -> dict:
    if opts.launcher == "torchrun":
        out = torchrun_orphans(opts, console)
        out["verdict"] = "pass" if (out["orphans_after_kill"] and out["cleaned"] and not out["leaked_pids"]
                                    and (out["device_mem_before_bytes"] is None or out["memory_back_s"] is not None)) \
            else "fail"
        return out
    out = signal_child_launcher("kill_launcher", opts, signal.SIGKILL, console)
    out["verdict"] = "pass" if fault_injected(out) and out["detect_s"] is not None and not out["leaked_pids"] \
        else "fail"
    return out
