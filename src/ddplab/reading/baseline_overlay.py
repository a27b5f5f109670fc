"""A baseline to draw dashed beside a report's own lines: another ddplab run or nccl-tests output."""

from __future__ import annotations

from ..records.compare import BaselineRows


def load_baseline(path: str) -> BaselineRows:
    """The file as `compare` reads its A side (UsageError, exit 2, naming the file when it is neither)."""
    from .comparison import load_input

    found = load_input(path)
    return BaselineRows(found.label, found.rows)
