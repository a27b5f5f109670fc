"""A drill ddplab does not ship, in one file (issue 19): SIGKILL the victim rank once the ranks run, as kill_rank
does, through the drills' own runner. tests/integration/test_toy_plugins.py registers it and runs it."""

import os
import signal
import time

from ddplab.drills import runner

SUMMARY = "a toy: SIGKILL the victim rank"
EXPECT = "the killed rank is named, nothing is left running"


def run(ctx: runner.DrillContext):
    def kill(run_dir, injections: runner.Injections) -> None:
        pid = runner.wait_for_ranks(run_dir, ctx.local_count).get(ctx.victim)
        if pid is not None:
            injections.record("SIGKILL from the toy drill", time.time())
            os.kill(pid, signal.SIGKILL)

    return runner.observe(ctx, "toy", "none", controller=kill).outcome
