"""Kubernetes node-problem-detector, custom plugin monitor: the plugin's exit code sets the node condition
(0 OK, 1 NonOK: the condition is true, a problem; any other code: unknown) and its standard output becomes the
condition's message, cut at the monitor's max_output_length. One line, the status first:

    CRITICAL: 1 critical of 24 checks: sweep collective results correct: #wrong 8192, errors 0 (expected 0)

A WARNING exits 0: the node is degraded, not broken, and its message still says WARNING (raise a bound's
severity to critical in the thresholds file to make it a node problem).
"""

from __future__ import annotations

from ..record import CheckRecord, Status
from . import injected_note, one_line


def render(record: CheckRecord) -> str:
    return f"{record.status.label}: {one_line(record.summary)}{injected_note(record.injected)}"


def unknown(message: str) -> str:
    return f"{Status.UNKNOWN.label}: {one_line(message)}"
