"""The figures a record offers, drawn as inline SVG: readable without JavaScript, offline.

Every axis has labelled ticks in its unit (the axes, at the end: display-free), classed ``tick-x``, ``tick-y`` or
``tick-cat`` (tests count them). Baseline lines are dashed, spikes ringed, marks are labelled vertical lines.
Markup is built only with ``h()``: every value escaped by MarkupSafe (as the page's autoescape is), the one place a
drawing is marked safe.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from markupsafe import Markup

from ..records.figures import BarChart, HistogramChart, LaneTimeline, LineChart, Mark, Table, Timeline

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
MARK_COLORS = {"fault": "#d62728", "detected": "#1f77b4", "stat": "#555", "threshold": "#ff7f0e",
               "event": "#555"}
W, H = 580, 300
LEFT, RIGHT, TOP, BOTTOM = 70, 30, 34, 46  # the plot area's margins: tick labels left and below, legend above


def h(template: str, *values, **named) -> Markup:
    """``template``, a literal of this module, with every value escaped after formatting (``{x:.1f}`` formats,
    then escapes); a value that is Markup h() made goes in as it is."""
    return Markup(template).format(*values, **named)


def concat(parts) -> Markup:
    """Fragments joined; a part that is not Markup is escaped as text."""
    return Markup("").join(parts)


def draw(figure) -> Markup:
    """One figure as a <figure> element."""
    for kind, drawer in ((LineChart, _line_chart), (HistogramChart, _histogram), (BarChart, _bar_chart),
                         (Timeline, _drill_timeline), (LaneTimeline, _lane_timeline), (Table, _table)):
        if isinstance(figure, kind):
            return drawer(figure)
    raise TypeError(f"no drawing for {type(figure).__name__}")


def _figure(svg: Markup, caption: str, wide: bool = False) -> Markup:
    return h("<figure class='{}'>{}<figcaption>{}</figcaption></figure>", "wide" if wide else "half", svg, caption)


def _svg(body: Markup, chart_id: str, kind: str, width: int = W, height: int = H) -> Markup:
    return h("<svg id='{id}' class='chart {kind}' width='{w}' height='{h}' viewBox='0 0 {w} {h}' "
             "xmlns='http://www.w3.org/2000/svg' role='img'>{body}</svg>", id=chart_id, kind=kind, w=width,
             h=height, body=body)


def _table(f: Table) -> Markup:
    head = concat(h("<th>{}</th>", c) for c in f.columns)
    rows = concat(h("<tr>{}</tr>", concat(h("<td>{}</td>", cell) for cell in row)) for row in f.rows)
    return h("<figure class='wide'><table id='{}' class='figure-table'><thead><tr>{}</tr></thead><tbody>{}</tbody>"
             "</table><figcaption>{}</figcaption></figure>", f.id, head, rows, f.caption)


# ------------------------------------------------------------------------------------------------ axes

def _x_axis(scale: Scale, ticks: list[float], unit: str, label: str, top: float, bottom: float) -> list[Markup]:
    """The axis line, a grid line and a tick at each value (two paths), the tick labels and the axis label."""
    xs = [scale(t) for t in ticks]
    grid = " ".join(f"M{x:.1f} {top:.1f}V{bottom:.1f}" for x in xs)
    marks = " ".join(f"M{x:.1f} {bottom:.1f}v4" for x in xs)
    out = [h("<path class='grid' d='{}' stroke='#eee'/><path d='M{:.1f} {:.1f}H{:.1f} {}' stroke='#333'/>", grid,
             scale.start, bottom, scale.end, marks)]
    out.extend(h("<text class='tick-x' x='{:.1f}' y='{:.1f}' text-anchor='middle'>{}</text>", x, bottom + 16, text)
               for x, text in zip(xs, tick_labels(ticks, unit, scale.log)))
    out.append(h("<text class='axis-label' x='{:.1f}' y='{:.1f}' text-anchor='middle'>{}</text>",
                 (scale.start + scale.end) / 2, bottom + 34, label))
    return out


def _y_axis(scale: Scale, ticks: list[float], unit: str, label: str, left: float, right: float) -> list[Markup]:
    ys = [scale(t) for t in ticks]
    grid = " ".join(f"M{left:.1f} {y:.1f}H{right:.1f}" for y in ys)
    marks = " ".join(f"M{left - 4:.1f} {y:.1f}h4" for y in ys)
    out = [h("<path class='grid' d='{}' stroke='#eee'/><path d='M{:.1f} {:.1f}V{:.1f} {}' stroke='#333'/>", grid,
             left, scale.start, scale.end, marks)]
    out.extend(h("<text class='tick-y' x='{:.1f}' y='{:.1f}' text-anchor='end'>{}</text>", left - 6, y + 4, text)
               for y, text in zip(ys, tick_labels(ticks, unit, scale.log)))
    middle = (scale.start + scale.end) / 2
    out.append(h("<text class='axis-label' x='12' y='{m:.1f}' transform='rotate(-90 12 {m:.1f})' "
                 "text-anchor='middle'>{}</text>", label, m=middle))
    return out


def _ticks(lo: float, hi: float, log: bool, unit: str) -> list[float]:
    return log_ticks(lo, hi, unit) if log else linear_ticks(lo, hi)


def _legend(entries: list[tuple[str, str, str]]) -> list[Markup]:
    """(label, colour, dash pattern) entries in a row above the plot, wrapping onto a second row."""
    out, x, y = [], LEFT, 14
    for label, color, dashed in entries:
        size = 26 + 6.2 * len(label)
        if x + size > W - RIGHT and x > LEFT:
            x, y = LEFT, y + 14
        out.append(h("<line x1='{x:.1f}' y1='{y:.1f}' x2='{x2:.1f}' y2='{y:.1f}' stroke='{c}' stroke-width='2' "
                     "stroke-dasharray='{d}'/><text class='legend' x='{tx:.1f}' y='{ty:.1f}' fill='{c}'>{label}</text>",
                     x=x, x2=x + 18, y=y - 4, c=color, d=dashed, tx=x + 22, ty=y, label=label))
        x += size
    return out


def _marks(marks: list[Mark], x_of: Scale, unit: str, top: float, bottom: float) -> list[Markup]:
    out = []
    for i, m in enumerate(marks):
        if not (min(x_of.start, x_of.end) - 1 <= x_of(m.x) <= max(x_of.start, x_of.end) + 1):
            continue
        x, color = x_of(m.x), MARK_COLORS.get(m.kind, "#555")
        out.append(h("<line class='mark {kind}' x1='{x:.1f}' y1='{t:.1f}' x2='{x:.1f}' y2='{b:.1f}' stroke='{c}' "
                     "stroke-width='1.5' stroke-dasharray='4 3'><title>{label}: {value}</title></line>"
                     "<text class='mark-label' x='{tx:.1f}' y='{ty:.1f}' fill='{c}'>{label}</text>",
                     kind=m.kind, x=x, t=top, b=bottom, c=color, label=m.label, value=tick_label(m.x, unit),
                     tx=x + 3, ty=top + 10 + 11 * (i % 4)))
    return out


# ------------------------------------------------------------------------------------------------ line charts

def _line_chart(f: LineChart) -> Markup:
    points = [(x, y / f.y_divisor) for s in f.series for x, y in s.points]
    if not points:
        return h("<p class='note'>{}: nothing to draw</p>", f.caption)
    ref = f.reference_line[1] / f.y_divisor if f.reference_line else None
    xs, ys = [x for x, _ in points], [y for _, y in points] + ([ref] if ref is not None else [])
    x_lo, x_hi = domain(xs, f.log_x, include_zero=f.x_unit == SECONDS, unit=f.x_unit)
    y_lo, y_hi = domain(ys, f.log_y, include_zero=not f.log_y, unit=f.y_unit)
    bottom, right = H - BOTTOM, W - RIGHT
    x_of = Scale(x_lo, x_hi, LEFT, right, f.log_x)
    y_of = Scale(y_lo, y_hi, bottom, TOP, f.log_y)
    body = [*_x_axis(x_of, _ticks(x_lo, x_hi, f.log_x, f.x_unit), f.x_unit, f.x_label, TOP, bottom),
            *_y_axis(y_of, _ticks(y_lo, y_hi, f.log_y, f.y_unit), f.y_unit, f.y_label, LEFT, right)]
    legend, dashes = [], iter(("6 4", "2 3", "10 3 2 3", "1 2"))
    for i, s in enumerate(f.series):
        color = COLORS[i % len(COLORS)] if not s.baseline else "#7f7f7f"
        dash = next(dashes, "6 4") if s.baseline else "none"
        own = sorted((x, y / f.y_divisor) for x, y in s.points if (x > 0 or not f.log_x) and (y > 0 or not f.log_y))
        coords = " ".join(f"{x_of(x):.1f},{y_of(y):.1f}" for x, y in own)
        body.append(h("<polyline class='series{b}' points='{p}' fill='none' stroke='{c}' stroke-width='{w}' "
                      "stroke-dasharray='{d}'><title>{label}</title></polyline>", b=" baseline" if s.baseline else "",
                      p=coords, c=color, w=1.5 if s.baseline else 2, d=dash, label=s.label))
        body.extend(h("<circle cx='{:.1f}' cy='{:.1f}' r='2.5' fill='{}'><title>{}: {} at {}</title></circle>",
                      x_of(x), y_of(y), color, s.label, tick_label(y, f.y_unit), tick_label(x, f.x_unit))
                    for x, y in own if not s.baseline)
        legend.append((s.label, color, dash))
    if ref is not None:
        y = y_of(ref)
        body.append(h("<line id='ceiling-line' class='reference' x1='{l}' y1='{y:.1f}' x2='{r}' y2='{y:.1f}' "
                      "stroke='#d62728' stroke-dasharray='6 4'/><text x='{tx}' y='{ty:.1f}' fill='#d62728'>"
                      "{label} {value}</text>", l=LEFT, r=right, y=y, tx=LEFT + 6, ty=y - 4,
                      label=f.reference_line[0], value=tick_label(ref, f.y_unit)))
    for p in f.highlights:
        body.append(h("<circle class='highlight' cx='{:.1f}' cy='{:.1f}' r='7' fill='none' stroke='#d62728' "
                      "stroke-width='2'><title>{}</title></circle><text x='{:.1f}' y='{:.1f}' fill='#d62728'>{}"
                      "</text>", x_of(p.x), y_of(p.y / f.y_divisor), p.label, x_of(p.x) + 8,
                      y_of(p.y / f.y_divisor) - 8, "spike"))
    body.extend(_marks(f.marks, x_of, f.x_unit, TOP, bottom))
    body.extend(_legend(legend))
    return _figure(_svg(concat(body), f.id, "xy"), f.caption)


def _histogram(f: HistogramChart) -> Markup:
    if not f.counts or len(f.edges) != len(f.counts) + 1:
        return h("<p class='note'>{}: nothing to draw</p>", f.caption)
    filled = [i for i, c in enumerate(f.counts) if c] or [0, len(f.counts) - 1]
    x_lo, x_hi = domain([f.edges[filled[0]], f.edges[filled[-1] + 1], *(m.x for m in f.marks)], f.log_x,
                           unit=f.x_unit)
    y_lo, y_hi = domain([float(c) for c in f.counts], False, include_zero=True)
    bottom, right = H - BOTTOM, W - RIGHT
    x_of = Scale(x_lo, x_hi, LEFT, right, f.log_x)
    y_of = Scale(y_lo, y_hi, bottom, TOP, False)
    body = [*_x_axis(x_of, _ticks(x_lo, x_hi, f.log_x, f.x_unit), f.x_unit, f.x_label, TOP, bottom),
            *_y_axis(y_of, _ticks(y_lo, y_hi, False, COUNT), COUNT, "ops", LEFT, right)]
    for a, b, count in zip(f.edges, f.edges[1:], f.counts):
        if count and x_lo <= a and b <= x_hi:
            body.append(h("<rect class='bar' x='{:.1f}' y='{:.1f}' width='{:.1f}' height='{:.1f}' fill='{}'>"
                          "<title>{} to {}: {} ops</title></rect>", x_of(a) + 0.5, y_of(count),
                          max(1.0, x_of(b) - x_of(a) - 1), bottom - y_of(count), COLORS[0],
                          tick_label(a, f.x_unit), tick_label(b, f.x_unit), count))
    outside = [f"{f.below} below {tick_label(f.edges[0], f.x_unit)}"] if f.below else []
    outside += [f"{f.above} above {tick_label(f.edges[-1], f.x_unit)}"] if f.above else []
    if outside:
        body.append(h("<text x='{}' y='14' text-anchor='end'>{}</text>", right, "; ".join(outside)))
    body.extend(_marks(f.marks, x_of, f.x_unit, TOP, bottom))
    return _figure(_svg(concat(body), f.id, "xy"), f.caption)


def _bar_chart(f: BarChart) -> Markup:
    """Bars by category (machine pairs, groups of ranks): the x axis is their names."""
    y_lo, y_hi = domain(list(f.values), False, include_zero=True)
    bottom, right = H - BOTTOM, W - RIGHT
    y_of = Scale(y_lo, y_hi, bottom, TOP, False)
    body = _y_axis(y_of, _ticks(y_lo, y_hi, False, PLAIN), PLAIN, f.y_label, LEFT, right)
    body.append(h("<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='#333'/><text class='axis-label' x='{:.1f}' "
                  "y='{}' text-anchor='middle'>{}</text>", LEFT, bottom, right, bottom, (LEFT + right) / 2,
                  bottom + 34, f.x_label))
    width = (right - LEFT) / max(1, len(f.values))
    for i, (label, value) in enumerate(zip(f.labels, f.values)):
        x = LEFT + i * width
        body.append(h("<rect class='bar' x='{:.1f}' y='{:.1f}' width='{:.1f}' height='{:.1f}' fill='{}'><title>"
                      "{}: {}</title></rect><text class='tick-cat' x='{:.1f}' y='{}' text-anchor='middle'>{}</text>",
                      x + 2, y_of(value), max(1.0, width - 4), bottom - y_of(value), COLORS[0], label,
                      number_label(value), x + width / 2, bottom + 16, label))
    return _figure(_svg(concat(body), f.id, "bars"), f.caption)


# ------------------------------------------------------------------------------------------------ timelines

def _drill_timeline(f: Timeline) -> Markup:
    """Each drill from its injection (0 s) to its first detection, on one seconds axis."""
    width, label_w, note_w, row_h = 1180, 130, 560, 26
    longest = max([r.detect_s for r in f.rows if r.detect_s is not None] + [0.1])
    lo, hi = domain([0.0, longest], False, include_zero=True)
    bottom = TOP + row_h * len(f.rows) + 6
    x_of = Scale(lo, hi, label_w, width - note_w, False)
    body = _x_axis(x_of, linear_ticks(lo, hi), SECONDS, "time from the fault to its first detection",
                   TOP - 6, bottom)
    for i, r in enumerate(f.rows):
        y = TOP + i * row_h + row_h / 2
        detected = (f"detected by {r.detected_by} after {duration_label(r.detect_s)}"
                    if r.detect_s is not None and r.detected_by else "not detected")
        body.append(h("<text class='tick-cat' x='4' y='{ty:.1f}'>{label}</text><circle cx='{x0:.1f}' cy='{y:.1f}' "
                      "r='5' fill='#d62728'><title>injected: {what}</title></circle>", ty=y + 4, label=r.label,
                      x0=x_of(0), y=y, what=r.injected))
        if r.detect_s is not None:
            body.append(h("<line x1='{x0:.1f}' y1='{y:.1f}' x2='{x1:.1f}' y2='{y:.1f}' stroke='#999' "
                          "stroke-width='3'/><circle cx='{x1:.1f}' cy='{y:.1f}' r='5' fill='#1f77b4'><title>{what}"
                          "</title></circle>", x0=x_of(0), x1=x_of(r.detect_s), y=y, what=detected))
        body.append(h("<text class='drill-row {cls}' x='{x:.1f}' y='{ty:.1f}'>{verdict}: {detected}; {note}</text>",
                      cls=str(r.verdict), x=width - note_w + 10, ty=y + 4, verdict=str(r.verdict).upper(),
                      detected=detected, note=r.note))
    return _figure(_svg(concat(body), f.id, "timeline", width=width, height=bottom + 44), f.caption, wide=True)


SPAN_FILL = {"done": "#9ecae1", "pending": "#fdae6b", "culprit-last": "#d62728", "stuck": "#ff7f0e"}


def _lane_timeline(f: LaneTimeline) -> Markup:
    """Ranks as lanes, each collective a bar from enqueue to end; the culprit's last entry and the stuck ones marked."""
    width, label_w, lane_h = 1180, 300, 38
    ends = [t for lane in f.lanes for s in lane.spans for t in (s.start_s, s.end_s)] + [m.x for m in f.marks]
    lo, hi = domain(ends or [0.0, 1.0], False)
    bottom = TOP + lane_h * len(f.lanes) + 6
    x_of = Scale(lo, hi, label_w, width - RIGHT, False)
    body = _x_axis(x_of, linear_ticks(lo, hi), SECONDS, "time from the first recorded collective",
                   TOP - 6, bottom)
    for i, lane in enumerate(f.lanes):
        y = TOP + i * lane_h + 6
        body.append(h("<text class='tick-cat lane' x='4' y='{:.1f}' font-weight='600'>{}</text>", y + 10, lane.label))
        if lane.note:
            body.append(h("<text class='lane-note' x='4' y='{:.1f}' font-size='10.5'>{}</text>", y + 24, lane.note))
        for s in lane.spans:
            x0, x1 = x_of(s.start_s), x_of(max(s.end_s, s.start_s))
            strong = s.state in ("culprit-last", "stuck")
            body.append(h("<rect class='span {state}' x='{x:.1f}' y='{y:.1f}' width='{w:.1f}' height='20' "
                          "fill='{fill}' stroke='{stroke}' stroke-width='{sw}'><title>{label}: {how}</title></rect>",
                          state=s.state, x=x0, y=y, w=max(2.0, x1 - x0), fill=SPAN_FILL.get(s.state, "#ccc"),
                          stroke="#8a1010" if strong else "#6b8fb3", sw=2 if strong else 0.5, label=s.label,
                          how=s.how))
            if strong or x1 - x0 > 40:
                body.append(h("<text class='span-label' x='{:.1f}' y='{:.1f}'>{}</text>", x0 + 3, y + 14, s.label))
    body.extend(_marks(f.marks, x_of, SECONDS, TOP - 6, bottom))
    parts = [h("<p class='headline' id='{}-headline'>{}</p>", f.id, f.headline)] if f.headline else []
    if f.link:
        parts.append(h("<p class='note'>The same entries as a trace (open it in Perfetto or chrome://tracing): "
                       "<a href='{}'>{}</a></p>", f.link, f.link))
    svg = _svg(concat(body), f.id, "timeline", width=width, height=bottom + 44)
    return h("<div class='lane-timeline'>{}{}</div>", concat(parts), _figure(svg, f.caption, wide=True))


# ---------------------------------------------------------------------------------------------- axes
# At least three labelled ticks per axis, so values can be read off; sizes in binary units, as nccl-tests' sizes are
# powers of two; times in the unit that keeps them short. ``Scale`` maps values to pixels.

MIN_TICKS = 3

# What an axis's values are, so that its ticks can say so in the unit a reader expects.
BYTES, MICROSECONDS, SECONDS, GBPS, COUNT, MIB, PLAIN = "bytes", "us", "s", "GB/s", "count", "MiB", "plain"


@dataclass(frozen=True)
class Scale:
    """Values between ``lo`` and ``hi`` onto pixels between ``start`` and ``end`` (end < start: upwards)."""

    lo: float
    hi: float
    start: float
    end: float
    log: bool = False

    def __call__(self, value: float) -> float:
        if self.log:
            value = max(value, self.lo)
            a, b, v = math.log10(self.lo), math.log10(self.hi), math.log10(value)
        else:
            a, b, v = self.lo, self.hi, value
        return self.start + (self.end - self.start) * (v - a) / ((b - a) or 1.0)


def domain(values: list[float], log: bool, include_zero: bool = False, unit: str = PLAIN) -> tuple[float, float]:
    """The range an axis spans: the values', widened to whole decades on a log axis (powers of two for sizes,
    spanning at least two so that three ticks fit) and to a round top on a linear one (from zero where asked:
    bars, bandwidths, counts)."""
    values = [v for v in values if math.isfinite(v) and (v > 0 or not log)]
    if not values:
        return (1.0, 10.0) if log else (0.0, 1.0)
    lo, hi = min(values), max(values)
    if log and unit == BYTES:
        a, b = math.floor(math.log2(lo) + 1e-9), math.ceil(math.log2(hi) - 1e-9)
        if b - a < 2:
            a, b = a - 1, a + 1 + max(0, b - a)
        return 2.0 ** a, 2.0 ** b
    if log:
        lo, hi = 10 ** math.floor(math.log10(lo)), 10 ** math.ceil(math.log10(hi))
        return (lo, hi * 10) if hi <= lo else (lo, hi)
    if include_zero:
        lo = min(lo, 0.0)
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    step = _nice_step((hi - lo) / 4)
    return math.floor(lo / step) * step, math.ceil(hi / step) * step


def linear_ticks(lo: float, hi: float, most: int = 7) -> list[float]:
    """Round values from ``lo`` to ``hi``: 3 to about ``most`` of them."""
    step = _nice_step((hi - lo) / (most - 1))
    while step > 0 and (hi - lo) / step < MIN_TICKS - 1:
        step = _smaller(step)
    first = math.ceil(lo / step - 1e-9) * step
    ticks, v = [], first
    while v <= hi + step * 1e-9:
        ticks.append(round(v, 12))
        v += step
    return ticks


def log_ticks(lo: float, hi: float, unit: str = PLAIN) -> list[float]:
    """Ticks on a log axis: powers of two for sizes (every 2nd, 4th... power so that at most 8 show), decades
    for anything else, with 2 and 5 between them when the axis spans fewer than two decades."""
    if unit == BYTES:
        a, b = math.ceil(math.log2(lo) - 1e-9), math.floor(math.log2(hi) + 1e-9)
        for stride in (1, 2, 4, 5, 10, 20):  # powers aligned to the stride: 1 KiB, 1 MiB, 1 GiB at 10
            powers = [e for e in range(a, b + 1) if e % stride == 0]
            if len(powers) <= 8:
                return [2.0 ** e for e in (powers if len(powers) >= MIN_TICKS else range(a, b + 1))]
        return [2.0 ** e for e in range(a, b + 1) if e % 20 == 0]
    a, b = math.floor(math.log10(lo) + 1e-9), math.ceil(math.log10(hi) - 1e-9)
    decades = [10.0 ** e for e in range(a, b + 1) if lo * (1 - 1e-9) <= 10.0 ** e <= hi * (1 + 1e-9)]
    if len(decades) >= MIN_TICKS:
        return decades
    steps = [m * 10.0 ** e for e in range(a - 1, b + 1) for m in (1, 2, 5)]
    return [v for v in steps if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9)]


def tick_label(value: float, unit: str) -> str:
    """A tick's label in the axis's unit: 4 KiB, 250 us, 1.5 ms, 12 GB/s, 3 s."""
    if unit == BYTES:
        return size_label(value)
    if unit == MICROSECONDS:
        return duration_label(value * 1e-6)
    if unit == SECONDS:
        return duration_label(value)
    return number_label(value)


def tick_labels(ticks: list[float], unit: str, log: bool) -> list[str]:
    """The labels of one axis: on a linear time axis all in one unit (0, 250, 500, 750 ms), chosen by its largest
    tick, so that the steps read evenly; elsewhere each in its own (100 us, 1 ms, 10 ms on a decade axis)."""
    if log or unit not in (SECONDS, MICROSECONDS) or not ticks:
        return [tick_label(t, unit) for t in ticks]
    scale = 1e-6 if unit == MICROSECONDS else 1.0
    top = max(abs(t) for t in ticks) * scale
    name, factor = next(((n, f) for n, f in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)) if top >= f * (1 - 1e-9)),
                        ("ns", 1e-9))
    return [f"{number_label(t * scale / factor)} {name}" for t in ticks]


def size_label(n: float) -> str:
    """Bytes in binary units, as nccl-tests' power-of-two sizes read: 8 B, 1 KiB, 64 MiB, 1.5 GiB."""
    for unit, factor in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if abs(n) >= factor:
            return f"{number_label(n / factor)} {unit}"
    return f"{number_label(n)} B"


def duration_label(seconds: float) -> str:
    """A time in the unit that keeps it short: 800 ns, 38 us, 1.5 ms, 12 s."""
    a = abs(seconds)
    if a == 0:
        return "0 s"
    for unit, factor in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if a >= factor * (1 - 1e-9):
            return f"{number_label(seconds / factor)} {unit}"
    return f"{number_label(seconds / 1e-9)} ns"


def number_label(v: float) -> str:
    """A short number: 3 significant digits (whole numbers from 100 on: 1830, not 1.83e+03), no trailing zeros,
    ten thousand and more as 12.3k."""
    if v == 0:
        return "0"
    if abs(v) >= 10_000:
        return f"{v / 1000:.3g}k"
    if abs(v) >= 100:
        return f"{v:.0f}"
    text = f"{v:.3g}"
    if "e" in text:  # .3g writes 1e-05 for tiny values: keep the digits instead
        text = f"{v:.6f}".rstrip("0").rstrip(".")
    return text


def _nice_step(raw: float) -> float:
    if raw <= 0 or not math.isfinite(raw):
        return 1.0
    exp = math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * 10 ** exp >= raw * (1 - 1e-9):
            return m * 10 ** exp
    return 10 ** (exp + 1)


def _smaller(step: float) -> float:
    exp = math.floor(math.log10(step) + 1e-9)
    mantissa = round(step / 10 ** exp, 6)
    return {1: 0.5, 2: 1, 2.5: 1, 5: 2}.get(mantissa, 1) * 10 ** exp
