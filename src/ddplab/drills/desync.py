"""desync: the victim switches to a broadcast while the others keep issuing all_reduce. Whatever the backend does
(error, hang or, worst, silently wrong data), the ranks' flight records show which rank issued which operation.
"""

from __future__ import annotations

from dataclasses import replace

from ..records.drill import DesyncDetails, DrillOutcome
from ..supervision.flight import last_call
from . import runner

SUMMARY = "ranks issue different collectives or sizes"
EXPECT = "detected within timeout + 5 s, both operations and the ranks issuing them named"


def run(ctx: runner.DrillContext) -> DrillOutcome:
    seen = runner.observe(ctx, "desync", "desync")
    operations = {rank: _operation(ev) for rank, ev in seen.session.outcome.evidence.items()}
    return replace(seen.outcome, details=DesyncDetails(operations=operations))


def _operation(ev) -> str:
    """The collective a rank was last in, as its flight record (or its main thread) says."""
    call = last_call(ev)
    if call:
        return f"{call['op']}({call['input_sizes']}) #{call['seq']}"
    return ev.torch_call or "not in a collective"
