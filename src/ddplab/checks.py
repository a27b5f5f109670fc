"""Check rows every measurement shares: each measurement's own rows are in its ``checks(record)``
(measurements/<name>.py); the lab adds its rows for stages that could not run and for leftovers (lab.py).
"""

from __future__ import annotations

from .records import Check, Verdict


def did_not_complete(session, command: str) -> list[Check]:
    """The one row of a measurement whose ranks did not all finish (its own rows would judge nothing)."""
    if session.completed:
        return []
    return [Check(f"{command} completed", Verdict.FAIL, session.failure_reason(), "completes",
                  "the ranks did not finish", "read the rank errors in the run directory")]


def setup_warnings(session) -> list[Check]:
    """A WARN row for what the placement policy warned about (e.g. ranks time-slicing a device)."""
    if not session.warnings:
        return []
    return [Check("setup warnings", Verdict.WARN, "; ".join(session.warnings), "none",
                  "the run worked, but not in the setup this machine does best", "see the warning")]
