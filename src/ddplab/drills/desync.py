"""desync: the victim switches to a different collective (broadcast of twice the size)
while the others keep issuing all_reduce. Whatever the backend does (error, hang or, worst,
silently wrong data), ddplab's status files show which rank issued which operation.
"""

from __future__ import annotations

from dataclasses import replace

from ..records.drill import DesyncDetails, DrillOutcome
from . import engine

SUMMARY = "ranks issue different collectives or sizes"
EXPECT = "detected within timeout + 5 s, both operations and the ranks issuing them named"


def run(ctx: engine.DrillContext) -> DrillOutcome:
    seen = engine.observe(ctx, "desync", "desync")
    hang = seen.outcome.session.hang
    operations = {rank: f"{state.op}({state.numel}) #{state.seq}"
                  for rank, state in (hang.snapshot if hang else {}).items()}
    return replace(seen.outcome, details=DesyncDetails(operations=operations))
