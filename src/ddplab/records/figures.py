"""Charts a record offers for the HTML report, as data, so a new measurement adds a chart without touching the
HTML. ``section`` is the heading a figure appears under, ``id`` its element id (tests and users find a chart by it);
an axis names its unit (report/charts.py), so its ticks read in that unit.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class _Figure:
    id: str
    section: str
    caption: str


@dataclass(frozen=True)
class BarChart(_Figure):
    x_label: str
    y_label: str
    labels: list[str]
    values: list[float]


@dataclass(frozen=True)
class Series:
    label: str
    points: list[tuple[float, float]]  # (x, y)
    baseline: bool = False  # another run or nccl-tests, drawn dashed under this run's lines


@dataclass(frozen=True)
class Mark:
    """A moment or a value marked across the plot: a fault, its detection, p50."""

    label: str
    x: float
    kind: str = "event"  # fault | detected | stat | threshold: how it is drawn


@dataclass(frozen=True)
class Highlight:
    """One point called out on a line: a spike, a regression."""

    label: str
    x: float
    y: float


@dataclass(frozen=True)
class Overlay:
    """Which baseline rows a chart can show beside its own (reading/comparison.py load_baseline): the op as
    `compare` names it in this report ("sweep-shared:all_reduce"), the bare op for nccl-tests, placement, and the
    number drawn."""

    op: str
    bare_op: str
    value: str  # time_us | busbw_gbps


@dataclass(frozen=True)
class LineChart(_Figure):
    x_label: str
    y_label: str
    series: list[Series]
    log_x: bool = False
    y_divisor: float = 1.0  # shown values are y / y_divisor (e.g. bytes shown in MiB)
    reference_line: tuple[str, float] | None = None  # (label, y): e.g. the device copy ceiling
    log_y: bool = False
    x_unit: str = "plain"
    y_unit: str = "plain"
    marks: list[Mark] = field(default_factory=list)
    highlights: list[Highlight] = field(default_factory=list)
    overlay: Overlay | None = None


@dataclass(frozen=True)
class HistogramChart(_Figure):
    """Counts per bin between ``edges`` (log-spaced bins drawn on a log axis), with marks such as p50 and p99;
    ``below``/``above`` count what fell outside the first and last edge."""

    x_label: str
    edges: list[float]
    counts: list[int]  # len(edges) - 1
    below: int = 0
    above: int = 0
    log_x: bool = True
    x_unit: str = "plain"
    marks: list[Mark] = field(default_factory=list)


@dataclass(frozen=True)
class TimelineRow:
    label: str
    injected: str  # what was injected (tooltip)
    detected_by: str | None
    detect_s: float | None  # seconds from injection to the first detection; None: never
    note: str  # e.g. "clean" or "2 leaked"
    verdict: str


@dataclass(frozen=True)
class Timeline(_Figure):
    rows: list[TimelineRow] = field(default_factory=list)


@dataclass(frozen=True)
class Table(_Figure):
    """Rows of text under a heading (e.g. a supervised job's ranks: exit, error, evidence files)."""

    columns: list[str]
    rows: list[list[str]]


@dataclass(frozen=True)
class Span:
    """One flight-recorder entry on its rank's lane: enqueued at ``start_s``; ``end_s`` when it completed (or
    was last seen pending); ``how`` says which."""

    label: str  # "all_reduce #4"
    start_s: float
    end_s: float
    how: str  # e.g. "completed", "still pending when the record was dumped"
    state: str  # done | pending | culprit-last | stuck


@dataclass(frozen=True)
class Lane:
    label: str  # "rank 1 (culprit)"
    spans: list[Span]
    note: str = ""  # e.g. "no flight record"


@dataclass(frozen=True)
class LaneTimeline(_Figure):
    """Ranks as lanes, their collectives as spans over wall time (seconds from ``origin``), with marks."""

    lanes: list[Lane]
    marks: list[Mark] = field(default_factory=list)
    headline: str = ""  # the finding in one sentence, above the drawing (the culprit)
    link: str = ""  # a file beside the page that holds the same data (the trace-event JSON)


Figure = BarChart | LineChart | HistogramChart | Timeline | LaneTimeline | Table
