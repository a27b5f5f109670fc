"""partition: one machine of a job across machines stops answering, as when its link goes down.

To the others a partition is a machine that says nothing more while its connections stay open. The drill makes
exactly that without touching a network interface (it may run on a user's machines): the victim's machine
freezes its own launcher and ranks with SIGSTOP past the others' deadline, then SIGKILLs them. The others must
declare the hang from the heartbeats that stopped and name that machine and its ranks.
"""

from __future__ import annotations

import signal

from ..records.drill import DrillOutcome
from . import node_harness, runner

SUMMARY = "one machine stops answering (its launcher and ranks frozen by SIGSTOP), as a partition looks to the others"
EXPECT = ("injects SIGSTOP into the launcher and every rank of the machine holding the victim rank (no interface is "
          "touched; run it on every machine), ended with SIGKILL after the hang timeout + 5 s. On the others: "
          "detected within timeout + 5 s, that machine and all of its ranks named, nothing left running; on the "
          "victim's machine: nothing of it left")
HOLD_MARGIN_S = 3.0  # past the others' deadline (hang timeout + 5 s), so they judge a machine still silent


def hold_s(ctx: runner.DrillContext) -> float:
    hang = ctx.config.launch.hang_timeout_s or ctx.timeout_s
    return hang + runner.DETECT_SLACK_S + HOLD_MARGIN_S


FREEZE = node_harness.NodeFault(inject=node_harness.stop_group(signal.SIGSTOP), hold_s=hold_s)


def run(ctx: runner.DrillContext) -> DrillOutcome:
    return node_harness.run(ctx, FREEZE)
