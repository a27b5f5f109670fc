"""What report.html draws for a `ddplab launch` job, and the units of the sampler's charts, display-free.

The job's page leads with its collectives per rank (flight_timeline.py: the hang as a timeline, the culprit
named), then the culprit table, the ranks, where the job listened, and each rank's memory and CPU time with
the moments the launcher saw marked (the last progress, the hang or the failure). Those moments are wall-clock
times; the sampler's series count seconds from its own start, so they are marked only where the record says
when that was (a ``started_at`` on the time series; reports without it get the charts unmarked).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from . import chart_scales as cs
from .flight_timeline import lane_timeline
from .records.figures import LineChart, Mark, Table
from .records.launch import LaunchRecord


def launch_figures(record: LaunchRecord, stage: str, base_dir: Path | None, trace_name: str) -> list:
    """The job's figures: the hang timeline first, the culprit in words, then the record's own tables and
    charts (records/launch.py), the charts with the launcher's moments marked."""
    own = [f for f in record.figures(stage) if f.id != "launch-culprit"]
    timeline = lane_timeline(record, base_dir, trace_name)
    marks = moments(record)
    own = [replace(f, marks=[*f.marks, *marks]) if isinstance(f, LineChart) and f.x_label == "time since the launch" else f
           for f in own]
    return ([timeline] if timeline else []) + [culprit_table(record, stage)] + own


def culprit_table(record: LaunchRecord, stage: str) -> Table:
    """Who held the job up and why, each row in words: what is not known is left out, never written "None"
    (the record's own table writes a collective without a group or sizes as "#None in group None")."""
    rows = [["outcome", record.summary()], ["detected by", record.detected_by or "nothing (the job ended by itself)"]]
    c = record.culprit
    if c:
        rows += [["culprit ranks", ", ".join(str(r) for r in c.ranks) + f" ({c.kind})"], ["reason", c.reason]]
        if c.collective and c.collective.op:
            rows.append(["collective", collective_words(c.collective)])
        analyzer = "; ".join(t for t in (f"{c.analyzer.tool}: {c.analyzer.status}", c.analyzer.why, c.analyzer.error)
                             if t)
        rows += [["evidence", "\n".join(c.evidence)], ["torch's analyzer", analyzer]]
    if record.torchrun_root_cause_rank is not None:
        rows.append(["torchrun would blame", f"rank {record.torchrun_root_cause_rank} (the first rank to fail)"])
    if record.hang:
        rows += hang_rows(record.hang)
    if record.launcher_error:
        rows.append(["launcher error", record.launcher_error])
    return Table("launch-culprit", "Culprit and evidence", f"{stage}: who held the job up, and why ddplab thinks so",
                 ["what", "found"], rows)


def collective_words(k) -> str:
    """all_reduce #4 in group 0, input sizes [[1024]], dtypes Float: the parts the flight records gave."""
    text = k.op + (f" #{k.seq}" if k.seq is not None else "") + (f" in group {k.pg}" if k.pg is not None else "")
    if k.input_sizes is not None:
        text += f", input sizes {k.input_sizes}"
    if k.dtypes:
        text += ", dtypes " + (", ".join(str(d) for d in k.dtypes) if isinstance(k.dtypes, list) else str(k.dtypes))
    return text


def hang_rows(hang) -> list[list[str]]:
    def ranks(found: list[int]) -> str:
        return ", ".join(str(r) for r in found) or "none"

    rows = [["hang", f"no progress for {cs.duration_label(hang.no_progress_s)} (hang timeout "
                     f"{cs.duration_label(hang.hang_timeout_s)}); ranks waiting: {ranks(hang.waiting_ranks)}; "
                     f"answered the dump request: {ranks(hang.answered)}; stacks by signal: "
                     f"{ranks(hang.signalled_for_stacks)}; terminated: {ranks(hang.terminated)}; killed after the "
                     f"grace period: {ranks(hang.killed)}"]]
    if hang.ras:
        ras = hang.ras
        said = (f"{ras.service}: " if ras.service else "") + ras.status + (f" ({ras.why})" if ras.why else "")
        rows.append(["RAS", said + (f" at {ras.address}" if ras.address else "")
                     + (f" in {cs.duration_label(ras.seconds)}" if ras.seconds is not None else "")])
        if ras.answer:
            rows.append([f"RAS answer ({ras.format})" if ras.format else "RAS answer", ras.answer])
    return rows


def moments(record: LaunchRecord) -> list[Mark]:
    """The launcher's moments in seconds of the sampler's series, where the series says when it started."""
    started = getattr(record.timeseries, "started_at", None) if record.timeseries else None
    if not isinstance(started, (int, float)):
        return []
    found = []
    if record.hang:
        found += [Mark("last progress", record.hang.last_progress_at - started, "event"),
                  Mark("hang declared", record.hang.declared_at - started, "detected")]
    elif record.detected_at:
        found.append(Mark("failure seen", record.detected_at - started, "detected"))
    return found
