"""Check rows every measurement shares: each measurement's own rows are in its ``checks(record)``
(measurements/<name>.py); the lab adds its rows for stages that could not run and for leftovers (lab/run.py).

And the rule for a finding: slow is worse than the median of the *others* by ``SLOW_FACTOR`` (so that one slow
machine of two or three cannot hide by moving the median); on the host CPU a finding is informational.
"""

from __future__ import annotations

import statistics

from ..records import Check, Verdict

HOST_NOTE = "informational on the host CPU: its cores are shared with everything else the machine runs"
SLOW_FACTOR = 2.0
SLOW_RULE = f"slow: worse than {SLOW_FACTOR:g}x the median of the others"


def did_not_complete(session, command: str) -> list[Check]:
    """The one row of a measurement whose ranks did not all finish (its own rows would judge nothing)."""
    if session.completed:
        return []
    return [Check(f"{command} completed", Verdict.FAIL, session.failure_reason(), "completes",
                  "the ranks did not finish", "read the rank errors in the run directory")]


def run_checks(session, command: str, own, exact: str | None = None, warnings: bool = True) -> list[Check]:
    """A measurement's rows: ``own()``, asked only when every rank finished (else the one row that says they did
    not), then the peak host RSS (``exact``: see ``peak_host_rss``) and the placement's warnings."""
    rss = peak_host_rss(session, exact)
    if not session.completed:
        return did_not_complete(session, command) + rss
    return [*own(), *rss, *(setup_warnings(session) if warnings else [])]


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


# ---------------------------------------------------------------------------------------------- findings

def slow_ones(values: dict[str, float], higher_is_worse: bool) -> list[str]:
    """Names whose value is worse than SLOW_FACTOR x the median of the others' (two values or more)."""
    if len(values) < 2:
        return []
    out = []
    for name, value in values.items():
        typical = statistics.median(v for other, v in values.items() if other != name)
        if (value > SLOW_FACTOR * typical) if higher_is_worse else (value * SLOW_FACTOR < typical):
            out.append(name)
    return out


def finding_verdict(found, host_only: bool) -> Verdict:
    """A finding (a size far off its neighbours, a slow machine or pair): WARN on an accelerator; on the host CPU
    nothing is held against it (HOST_NOTE): INFO."""
    if host_only:
        return Verdict.INFO
    return Verdict.WARN if found else Verdict.PASS


def rule_text(rule: str, host_only: bool) -> str:
    return f"{rule}; {HOST_NOTE}" if host_only else rule


def machines_alike(what: str, values: dict[str, float], unit: str, higher_is_worse: bool, host_only: bool) -> Check:
    slow = slow_ones(values, higher_is_worse)
    shown = "; ".join(f"{m} {v:.2f} {unit}" for m, v in values.items())
    return Check(f"no machine slower than the others ({what})", finding_verdict(bool(slow), host_only),
                 (f"slow: {', '.join(slow)}; " if slow else "") + shown, rule_text(SLOW_RULE, host_only),
                 "each machine's own group of ranks, measured alone: one machine much worse than the others is a "
                 "finding about that machine (its device links, its load, its settings)",
                 "none" if not slow else f"look at {', '.join(slow)}: its device links and what else runs there; "
                                         f"`ddplab sweep` on it alone")
