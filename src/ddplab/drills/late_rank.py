"""late_rank: one rank sleeps before init_process_group (the report's scenario B).

gloo: the others' store wait times out after --timeout (DistStoreError). NCCL: communicator creation is NOT bounded
by the timeout; ddplab's supervisor sees every other rank in init and the victim before it, and names the victim.
"""

from __future__ import annotations

from ..records.drill import DrillOutcome
from . import runner

SUMMARY = "one rank arrives late to init_process_group"
EXPECT = "detected within timeout + 5 s (by the backend or ddplab's supervisor), the late rank named"


def run(ctx: runner.DrillContext) -> DrillOutcome:
    return runner.observe(ctx, "late_rank", "late").outcome
