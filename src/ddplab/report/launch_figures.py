"""What report.html draws for a `ddplab launch` job, display-free: its collectives per rank, the culprit table, the
ranks, where it listened, and each rank's memory and CPU time with the launcher's moments marked (the last progress,
the hang or the failure), only where the time series says when it started (``started_at``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from .flight_timeline import lane_timeline, launcher_moments
from ..records.figures import LineChart, Mark
from ..records.launch import LaunchRecord


def launch_figures(record: LaunchRecord, stage: str, base_dir: Path | None, trace_name: str) -> list:
    """The job's figures: the hang timeline, the culprit in words, then the record's tables and marked charts."""
    marks = moments(record)
    own = [replace(f, marks=[*f.marks, *marks]) if isinstance(f, LineChart) and f.x_label == "time since the launch"
           else f for f in record.figures(stage) if f.id != "launch-culprit"]
    timeline = lane_timeline(record, base_dir, trace_name)
    return ([timeline] if timeline else []) + [record.culprit_table(stage)] + own


def moments(record: LaunchRecord) -> list[Mark]:
    """The launcher's moments in seconds of the sampler's series, where the series says when it started."""
    started = getattr(record.timeseries, "started_at", None) if record.timeseries else None
    if not isinstance(started, (int, float)):
        return []
    return [Mark(label, at - started, kind) for label, at, kind in launcher_moments(record)]
