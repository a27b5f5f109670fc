"""Charts a record offers for the HTML report, as data: the report draws them (html_report.py) without
knowing which measurement they came from, so a new measurement adds a chart without touching the HTML.

A record's ``figures(stage)`` returns these; ``section`` is the heading they appear under, ``id`` the
element id (tests and users find a chart by it; the report makes repeated ids unique).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class BarChart:
    id: str
    section: str
    caption: str
    x_label: str
    y_label: str
    labels: list[str]
    values: list[float]


@dataclass(frozen=True)
class Series:
    label: str
    points: list[tuple[float, float]]  # (x, y)


@dataclass(frozen=True)
class LineChart:
    id: str
    section: str
    caption: str
    x_label: str
    y_label: str
    series: list[Series]
    log_x: bool = False
    y_divisor: float = 1.0  # shown values are y / y_divisor (e.g. bytes shown in MiB)
    reference_line: tuple[str, float] | None = None  # (label, y): e.g. the device copy ceiling


@dataclass(frozen=True)
class TimelineRow:
    label: str
    injected: str  # what was injected (tooltip)
    detected_by: str | None
    detect_s: float | None  # seconds from injection to the first detection; None: never
    note: str  # e.g. "clean" or "2 leaked"
    verdict: str


@dataclass(frozen=True)
class Timeline:
    id: str
    section: str
    caption: str
    rows: list[TimelineRow] = field(default_factory=list)




@dataclass(frozen=True)
class Table:
    """Rows of text under a heading (e.g. a supervised job's ranks: exit, error, evidence files)."""

    id: str
    section: str
    caption: str
    columns: list[str]
    rows: list[list[str]]


Figure = BarChart | LineChart | Timeline | Table
