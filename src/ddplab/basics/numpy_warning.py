"""torch's warning that numpy is missing: no finding for ddplab, so not shown.

torch warns when it is imported without numpy ("UserWarning: Failed to initialize NumPy: No module named
'numpy'", raised while torch/_subclasses/functional_tensor.py is imported). ddplab never needs numpy (it reads
tensors without it: workloads/ddp_train.py), and Debian's system Python has none, so a fresh `make lab` printed
that line in the middle of the env stage (the first import of torch: platform/detect.py), and once more in every
rank. Only that exact message is filtered: a numpy that is installed but broken ("Failed to initialize NumPy:
_ARRAY_API not found", an ABI mismatch) is a real problem and still shown; code that needs numpy without it fails
with its own error.
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
    """PYTHONWARNINGS for ranks ddplab starts for its own workloads (never for a user's job under `ddplab launch`):
    ``current`` (the user's own filters, kept) and the missing-numpy filter. A rank imports torch before any
    ddplab code runs in it (elastic unpickles torch's process wrapper first), so an in-process filter comes too
    late there; the ddplab command itself has already shown a broken numpy's warning, if any."""
    kept = [f for f in (current or "").split(",") if f and f != _RANK_FILTER]
    return ",".join([*kept, _RANK_FILTER])
