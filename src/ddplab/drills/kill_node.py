"""kill_node: one machine of a job across machines dies (SIGKILL of its launcher and all its ranks).

Run `ddplab drill kill_node --nnodes N --rdzv-endpoint HOST:PORT ...` on every machine. The victim's machine kills
its own part of the job; the others' ranks fail at once, and their launcher names the machine that went silent,
with its ranks (states.silent_machines). Only ddplab's own processes are signalled.
"""

from __future__ import annotations

import signal

from ..records.drill import DrillOutcome
from . import node_harness, runner

SUMMARY = "SIGKILL one machine's launcher and all its ranks (a job across machines)"
EXPECT = ("injects SIGKILL into the launcher and every rank of the machine holding the victim rank (run it on every "
          "machine). On the others: detected within timeout + 5 s, that machine and all of its ranks named, nothing "
          "left running; on the victim's machine: nothing of it left")

KILL = node_harness.NodeFault(inject=node_harness.stop_group(signal.SIGKILL), hold_s=lambda ctx: 0.0)


def run(ctx: runner.DrillContext) -> DrillOutcome:
    return node_harness.run(ctx, KILL)
