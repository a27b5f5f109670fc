"""oom: the victim allocates 1 GiB beyond its memory cap.

On a device the cap is the allocator fraction, which the allocator's error names ("N GiB allowed"); on the host the
victim caps its own address space (RLIMIT_AS) 256 MiB above what it uses and exceeds that.
"""

from __future__ import annotations

from dataclasses import replace

from ..records.drill import DrillOutcome, OomDetails
from . import runner
from .mechanisms import OUT_OF_MEMORY, classify, excerpt

SUMMARY = "one rank allocates beyond its memory cap"
EXPECT = "the victim fails with an out-of-memory error naming its cap, the group is torn down, nothing left"
DEFAULT_FRACTION = 0.25


def run(ctx: runner.DrillContext) -> DrillOutcome:
    seen = runner.observe(ctx, "oom", "oom", memory_fraction=DEFAULT_FRACTION)
    victim = seen.states.get(ctx.victim)
    error = (victim.error if victim else None) or ""
    details = OomDetails(victim_error=excerpt(error), victim_error_names_cap=names_cap(error))
    missed = [*(seen.outcome.failed_because or []),
              *([] if details.victim_error_names_cap else ["the victim's error did not name its memory cap"])]
    return runner.with_missed(replace(seen.outcome, details=details), missed)


def names_cap(error: str) -> bool:
    """An out-of-memory error that says which cap it hit (the allocator's "allowed", ours "cap")."""
    return classify(error) == OUT_OF_MEMORY and ("cap" in error or "allowed" in error)
