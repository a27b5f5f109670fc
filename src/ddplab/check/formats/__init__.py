"""What each health-check runner reads, all made from one CheckRecord (and the Report around it).

    --format text    the terminal table (default)
    --format json    the JSON report on stdout
    --format nagios  Nagios plugin: one status line with perfdata
    --format npd     node-problem-detector custom plugin: one message line
    --textfile-dir   Prometheus exposition for node_exporter's textfile collector (any format)
    --junit          JUnit XML, one testcase per check (any format)

Exit codes by format (EXIT_CODES): text and json use ddplab's own; in a runner's format the runner's convention
wins, and anything that is not a verdict on the node (bad usage, cannot run here, an internal error, a stopped
check) is that runner's UNKNOWN.
"""

from __future__ import annotations

from ..record import Status

FORMATS = ("text", "json", "nagios", "npd")
RUNNER_FORMATS = ("nagios", "npd")
# The runners' UNKNOWN: Nagios' 3; node-problem-detector's custom plugin protocol says 2 (its cpmtypes.Unknown; it
# reads any code but 0 and 1 so).
UNKNOWN_EXIT = {"nagios": 3, "npd": 2}

EXIT_CODES = {
    "text": {Status.OK: 0, Status.WARNING: 0, Status.CRITICAL: 1, Status.UNKNOWN: 3},
    "json": {Status.OK: 0, Status.WARNING: 0, Status.CRITICAL: 1, Status.UNKNOWN: 3},
    "nagios": {s: s.code for s in Status},
    # A WARNING is no node problem: the node stays schedulable. NPD throws a plugin's output away on exit 0, so the
    # warning reaches a condition of its own through the example's second rule (examples/fleet/node-problem-detector).
    "npd": {Status.OK: 0, Status.WARNING: 0, Status.CRITICAL: 1, Status.UNKNOWN: UNKNOWN_EXIT["npd"]},
}


def exit_code(status: Status, fmt: str) -> int:
    return EXIT_CODES[fmt][status]


def one_line(text: str) -> str:
    """Text a runner shows on one line: no line breaks, and no "|" (Nagios' perfdata separator)."""
    return " ".join(str(text).replace("|", "/").split())


def injected_note(injected: list[str]) -> str:
    """The faults put in on purpose, after a runner's line (nothing when there were none)."""
    return f" [injected faults: {one_line(', '.join(injected))}]" if injected else ""
