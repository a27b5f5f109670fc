"""Kubernetes node-problem-detector, custom plugin monitor. What NPD does with a plugin's result (its
custompluginmonitor package): exit 1 (NonOK) sets the rule's condition True, with the rule's reason and the
plugin's standard output as the message; exit 0 (OK) sets it False with the condition's default reason and
default message, throwing the output away; any other exit (2 is the protocol's Unknown) sets it Unknown with the
default reason and the output as the message. The output is cut at the monitor's max_output_length.

One line, the status first, so that the message says which status it is whatever the reason reads:

    CRITICAL: 1 critical of 24 checks: sweep collective results correct: #wrong 8192, errors 0 (expected 0)

Exit 0 OK or WARNING, 1 CRITICAL, 2 UNKNOWN. A WARNING exits 0 (the node is degraded, not broken: a problem
condition would have it drained), so NPD drops its line; the example monitor (examples/fleet/node-problem-
detector) gives warnings a condition of their own with a second rule that reads this line back.
"""

from __future__ import annotations

from ..record import CheckRecord, Status
from . import injected_note, one_line


def render(record: CheckRecord) -> str:
    return f"{record.status.label}: {one_line(record.summary)}{injected_note(record.injected)}"


def unknown(message: str) -> str:
    return f"{Status.UNKNOWN.label}: {one_line(message)}"
