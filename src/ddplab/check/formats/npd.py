"""Kubernetes node-problem-detector, custom plugin monitor: exit 1 (NonOK) sets the rule's condition True with the
plugin's output as the message; exit 0 sets it False and throws the output away; any other exit (2 is the
protocol's Unknown) sets it Unknown. One line, the status first, so the message says its status whatever the
reason reads:

    CRITICAL: 1 critical of 24 checks: sweep collective results correct: #wrong 8192, errors 0 (expected 0)

A WARNING exits 0 (the node is degraded, not broken: a problem condition would have it drained), so NPD drops its
line; the example monitor (examples/fleet/node-problem-detector) gives warnings a condition of their own.
"""

from __future__ import annotations

from ..record import CheckRecord, Status
from . import injected_note, one_line


def render(record: CheckRecord) -> str:
    return f"{record.status.label}: {one_line(record.summary)}{injected_note(record.injected)}"


def unknown(message: str) -> str:
    return f"{Status.UNKNOWN.label}: {one_line(message)}"
