"""kill_rank: SIGKILL one rank while every rank is busy issuing collectives."""

from __future__ import annotations

import os
import signal
import time

from ..records.drill import DrillOutcome
from ..basics.rundir import RunDir
from . import runner

SUMMARY = "SIGKILL one rank mid-collective"
EXPECT = "the group is torn down within timeout + 5 s, the killed rank is named, no process is left"


def run(ctx: runner.DrillContext) -> DrillOutcome:
    kill = kill_when_running(ctx.victim, ctx.local_count, signal.SIGKILL, "SIGKILL to the rank")
    return runner.observe(ctx, "kill_rank", "none", controller=kill).outcome


def kill_when_running(victim: int, local_count: int, sig: int, what: str) -> runner.Controller:
    """A controller that sends ``sig`` to the victim (a global rank) once every local rank has done a few
    collectives. Nothing is recorded when the victim is not on this machine or was already gone."""
    def control(run: RunDir, injections: runner.Injections) -> None:
        pids = runner.wait_for_ranks(run, local_count)
        victim_pid = pids.get(victim)
        if victim_pid is None:
            return
        sent_at = time.time()
        try:
            os.kill(victim_pid, sig)
        except ProcessLookupError:
            return  # the rank was already gone: nothing was injected
        injections.record(what, sent_at)
    return control
