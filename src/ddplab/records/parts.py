"""The open parts of the records, typed for reading a report back (codec.py ``json_parts``, ``parts_typed``).

A session's record (records/session.py) holds two parts it cannot type itself: the placement, written from
records.placement.Placement, and its sharing daemon's account, wherever a session is reported (every report:
``report_parts``), and each rank's workload
result, whose type depends on the measurement (its record's ``json_parts``: ``session_parts``). Naming them
here lets a report read back check them as strictly as the rest: a string where a rank wrote a number is
refused, naming the field (issue 18).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SharingDaemonPart:
    """A session's ``sharing_daemon``, as platform/sharing_daemon.py's ``PrivateDaemon.record()`` writes it."""

    name: str | None
    private: bool
    used: bool
    failure: str | None
    env: dict[str, str]
    events: list[str]


def report_parts() -> dict:
    """{(class, field): type} for the parts any report may hold: a session's placement and sharing daemon."""
    from .placement import Placement
    from .session import SessionRecord

    return {(SessionRecord, "placement"): Placement, (SessionRecord, "sharing_daemon"): SharingDaemonPart}


def session_parts(rank_result: type) -> dict:
    """{(class, field): type} for a record that flattens a session whose ranks return ``rank_result``."""
    from .session import RankOutcome

    return {(RankOutcome, "result"): rank_result}
