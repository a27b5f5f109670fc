"""torch's warning that numpy is missing: no finding for ddplab, so not shown.

torch warns when it is imported without numpy; ddplab never needs numpy, and Debian's system Python has none, so
the line showed in the middle of the env stage and once more in every rank. Only that exact message is filtered: a
numpy that is installed but broken (an ABI mismatch) is a real problem and still shown.
"""

from __future__ import annotations

import re
import warnings

MESSAGE = "Failed to initialize NumPy: No module named 'numpy'"
# PYTHONWARNINGS splits its fields at ":", so for processes started with it the filter can only name the
# message up to its first colon (matched from the start, any case).
_RANK_FILTER = f"ignore:{MESSAGE.split(':')[0]}:UserWarning"


def ignore_in_this_process() -> None:
    """Filter exactly torch's missing-numpy warning in this process (the ddplab command's own: ranks and the
    user's job are other processes, whose warnings this does not touch)."""
    warnings.filterwarnings("ignore", message=re.escape(MESSAGE), category=UserWarning)


def for_ranks(current: str | None) -> str:
    """PYTHONWARNINGS for ranks ddplab starts for its own workloads (never for a user's job): ``current`` (kept)
    and the missing-numpy filter. A rank imports torch before any ddplab code runs in it, so an in-process filter
    comes too late there."""
    kept = [f for f in (current or "").split(",") if f and f != _RANK_FILTER]
    return ",".join([*kept, _RANK_FILTER])
