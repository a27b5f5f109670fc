"""Check rows every measurement shares: each measurement's own rows are in its ``checks(record)``
(measurements/<name>.py); the lab adds its rows for stages that could not run and for leftovers (lab/run.py).
"""

from __future__ import annotations

from ..records import Check, Verdict


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


def peak_host_rss(session, exact: str | None = None) -> list[Check]:
    """The stage's peak host RSS (informational): each rank's largest resident set as the sampler saw it, and
    ``exact``, what the stage measured itself where it did. No row where nothing was seen."""
    from ..basics.sizes import human_bytes

    peaks = {r.rank: r.peaks.peak_rss_bytes for r in session.ranks if r.peaks and r.peaks.peak_rss_bytes}
    if not peaks and exact is None:
        return []
    parts = []
    if peaks:
        rank, largest = max(peaks.items(), key=lambda item: item[1])
        parts.append(f"{human_bytes(largest)} (rank {rank}); {human_bytes(sum(peaks.values()))} for the "
                     f"{len(peaks)} rank(s) of this machine together, sum of peaks (sampled every "
                     f"{session.timeseries.interval_s} s)")
    if exact:
        parts.append(exact)
    return [Check("peak host RSS", Verdict.INFO, "; ".join(parts), "informational",
                  "the most host memory a rank held resident: what this stage needs of the machine",
                  "a size that cannot fit is skipped before it is allocated (memory planning, memory_plan.py)")]
