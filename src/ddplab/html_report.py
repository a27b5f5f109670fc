"""A report (records.Report) -> one self-contained HTML page (inline CSS and SVG, no scripts from a CDN,
works offline). Rendered from the records alone, so `ddplab report report.json` can rebuild any report later.

Sections: the verdict table (verdict, number, threshold, meaning, next step: each measurement's checks),
then the charts the records offer (records/figures.py: the storm's latency histogram, busbw vs message size
with the copy-ceiling line, per-rank memory over time, the drill timeline...), then the stages. The page
draws figures without knowing which measurement made them.

Every value from the document reaches the page through ``h()``, which escapes all of them
(numbers too); only ``Markup`` (fragments ``h()`` built from this module's own templates)
is inserted as is, and anything else handed to ``concat()`` is escaped as text. A value
interpolated any other way (an f-string, ``+``) is a plain string, which ``concat()``
escapes: an unescaped value cannot reach the page by omission. tests/unit/test_html_report.py
checks that every template is a literal and that ``Markup()`` wraps only the CSS and the
JSON data block. `ddplab report` reads the document through the records first (records/load.py), so
the numbers here are numbers.
"""

from __future__ import annotations

import html
import json
import math
import string
from typing import Iterable

from .records import Check, Report
from .records.figures import BarChart, LineChart, Table, Timeline

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
VERDICT_CLASS = {"pass": "pass", "warn": "warn", "fail": "fail", "skip": "skip"}

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{margin:0 0 4px 0}h2{margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#555;font-size:14px}.badge{display:inline-block;padding:2px 10px;border-radius:4px;font-weight:700}
.pass{background:#d4f4dd;color:#135d2a}.warn{background:#fff1c2;color:#7a5a00}.fail{background:#ffd6d6;color:#8a1010}
.skip{background:#eee;color:#666}table{border-collapse:collapse;width:100%;font-size:13px}
th,td{border:1px solid #ddd;padding:4px 6px;text-align:left;vertical-align:top}th{background:#f5f5f5}
figure{margin:12px 0}figcaption{font-size:12px;color:#555}svg text{font-size:11px;fill:#333}
.note{font-size:12px;color:#666}.figure-table td{white-space:pre-wrap}
"""


class Markup(str):
    """HTML this module wrote itself: inserted as is. Everything else is escaped."""


class _EscapingFormatter(string.Formatter):
    def format_field(self, value, format_spec):
        if isinstance(value, Markup):
            if format_spec:
                raise ValueError("markup takes no format spec")
            return value
        return html.escape(format(value, format_spec), quote=True)


_FORMATTER = _EscapingFormatter()


def h(template: str, *args, **kwargs) -> Markup:
    """The one way markup is built here: ``template`` is this module's own HTML, and every
    value put into it is escaped after formatting (``{x:.1f}`` formats, then escapes),
    unless it is Markup that h() built."""
    return Markup(_FORMATTER.vformat(template, args, kwargs))


def concat(parts: Iterable, lines: bool = False) -> Markup:
    """Fragments joined (one per line when ``lines``); a part that is not Markup is escaped as text."""
    return Markup(("\n" if lines else "").join(p if isinstance(p, Markup) else html.escape(str(p), quote=True)
                                                for p in parts))


def render_html(report: Report) -> str:
    """The page of any report: a `ddplab run` report (its stages), or one command's report as one stage."""
    from .lab import report_checks, stage_checks

    run = getattr(report.results, "stages", None)
    if run is not None:
        stages = [(s.name, s.report) for s in run]
        checks = report.results.checks
        stage_rows = [(s.name, s.command, s.verdict, s.summary, s.duration_s) for s in run]
    else:
        stages = [(report.command, report)]
        checks = [Check(c.check, c.verdict, c.value, c.threshold, c.meaning, c.next_step, stage=report.command)
                  for c in report_checks(report)]
        stage_rows = [(report.command, " ".join(["ddplab", report.command, *report.argv[1:]]), report.verdict,
                       "", getattr(report.results, "duration_s", None))]
    figures = _unique_ids([f for name, rep in stages if rep is not None
                           for f in getattr(rep.results, "figures", lambda _: [])(name)])
    verdict = str(report.verdict)
    r = report.results
    parts = [
        h("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"),
        h("<title>ddplab report: {}</title><style>{}</style></head><body>", verdict.upper(), Markup(CSS)),
        h("<h1>ddplab {} <span class='badge {}' id='overall-verdict'>{}</span></h1>", report.command,
          VERDICT_CLASS.get(verdict, ""), verdict.upper()),
        h("<div class='meta'>{}<br>{}{}, {} s{}</div>", _machine_line(report.platform),
          f"profile {r.profile}, " if run is not None else "", report.created_utc,
          getattr(r, "duration_s", None) if getattr(r, "duration_s", None) is not None else "?",
          h(" &mdash; <b>INTERRUPTED: partial report</b>") if getattr(r, "interrupted", False) else ""),
        h("<h2>Verdicts</h2>"), _verdict_table(checks),
        *_figure_sections(figures),
        h("<h2>Stages</h2>"), _stage_table(stage_rows),
        h("<p class='note'>Every number comes from report.json beside this page; each stage's command line "
          "reproduces it alone. Bandwidths use GB = 1e9 bytes and nccl-tests' algbw/busbw definitions.</p>"),
        h("<script type='application/json' id='report-data'>{}</script>", Markup(json_for_script(report.to_json()))),
        h("</body></html>"),
    ]
    return str(concat(parts, lines=True))


def _badge(verdict) -> Markup:
    verdict = str(verdict)
    return h("<span class='badge {}'>{}</span>", VERDICT_CLASS.get(verdict, ""), verdict.upper())


def json_for_script(doc: dict) -> str:
    """The document as JSON that cannot end its <script> element: "</script", "<!--" and
    "-->" need < and >, which JSON spells as \\u003c / \\u003e inside strings (the only place
    they can occur); & likewise. ensure_ascii writes U+2028/2029 as \\u escapes too."""
    text = json.dumps(doc, default=str, ensure_ascii=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _machine_line(p) -> str:
    if p is None:
        return "platform unknown"
    own = getattr(p, "machine_line", None)  # a record that is not a probed Platform (a job's launcher host)
    if callable(own):
        return own()
    devices = ", ".join(str(d.name) for d in p.devices)
    return (f"{p.hostname}: {p.device_count} x {devices} ({p.vendor}), torch {p.torch_version}, "
            f"{p.collective_library} {p.collective_loaded_version or ''}")


def _verdict_table(rows: list[Check]) -> Markup:
    out = [h("<table id='verdict-table'><thead><tr><th>stage</th><th>check</th><th>verdict</th><th>number</th>"
             "<th>threshold</th><th>what it means</th><th>next step</th></tr></thead><tbody>")]
    for r in rows:
        out.append(h("<tr class='check-row'><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
                     "<td>{}</td></tr>", r.stage, r.check, _badge(r.verdict), r.value, r.threshold, r.meaning,
                     r.next_step))
    out.append(h("</tbody></table>"))
    return concat(out)


def _stage_table(stages: list[tuple]) -> Markup:
    out = [h("<table><thead><tr><th>stage</th><th>command</th><th>verdict</th><th>summary</th><th>s</th></tr>"
             "</thead><tbody>")]
    for name, command, verdict, summary, duration in stages:
        out.append(h("<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>", name, command,
                     _badge(verdict), summary, "" if duration is None else duration))
    out.append(h("</tbody></table>"))
    return concat(out)


def _unique_ids(figures: list) -> list:
    """Element ids must be unique on a page: a repeated one gets -2, -3... (the first keeps its name)."""
    from dataclasses import replace

    seen: dict[str, int] = {}
    out = []
    for f in figures:
        seen[f.id] = seen.get(f.id, 0) + 1
        out.append(f if seen[f.id] == 1 else replace(f, id=f"{f.id}-{seen[f.id]}"))
    return out


def _figure_sections(figures: list) -> list[Markup]:
    """Figures grouped under their section headings, in order of first appearance."""
    sections: dict[str, list] = {}
    for f in figures:
        sections.setdefault(f.section, []).append(f)
    out = []
    for title, group in sections.items():
        out.append(h("<h2>{}</h2>", title))
        out.extend(_draw(f) for f in group)
    return out


def _draw(figure) -> Markup:
    if isinstance(figure, BarChart):
        return _bar_chart(figure)
    if isinstance(figure, LineChart):
        return _line_chart(figure)
    if isinstance(figure, Timeline):
        return _timeline(figure)
    if isinstance(figure, Table):
        return _table(figure)
    raise TypeError(f"no drawing for {type(figure).__name__}")


def _table(f: Table) -> Markup:
    head = concat(h("<th>{}</th>", c) for c in f.columns)
    rows = concat(h("<tr>{}</tr>", concat(h("<td>{}</td>", cell) for cell in row)) for row in f.rows)
    return h("<figure><table id='{}' class='figure-table'><thead><tr>{}</tr></thead><tbody>{}</tbody></table>"
             "<figcaption>{}</figcaption></figure>", f.id, head, rows, f.caption)


# --------------------------------------------------------------------------- charts (inline SVG)

W, H, PAD = 720, 260, 48


def _svg(body: Markup, chart_id: str, caption: str) -> Markup:
    return h("<figure><svg id='{id}' class='chart' width='{w}' height='{h}' viewBox='0 0 {w} {h}' "
             "xmlns='http://www.w3.org/2000/svg' role='img'>{body}</svg><figcaption>{caption}</figcaption>"
             "</figure>", id=chart_id, w=W, h=H, body=body, caption=caption)


def _axes(x_label: str, y_label: str) -> Markup:
    return h("<line x1='{pad}' y1='{base}' x2='{right}' y2='{base}' stroke='#333'/>"
             "<line x1='{pad}' y1='10' x2='{pad}' y2='{base}' stroke='#333'/>"
             "<text x='{mid_x}' y='{label_y}' text-anchor='middle'>{x_label}</text>"
             "<text x='12' y='{mid_y}' transform='rotate(-90 12 {mid_y})' text-anchor='middle'>{y_label}</text>",
             pad=PAD, base=H - PAD, right=W - 10, mid_x=W / 2, label_y=H - 8, mid_y=H / 2, x_label=x_label,
             y_label=y_label)


def _bar_chart(f: BarChart) -> Markup:
    top = max(f.values, default=0) or 1
    bw = (W - PAD - 20) / max(1, len(f.values))
    bars = []
    for i, (label, value) in enumerate(zip(f.labels, f.values)):
        bar_h = (H - PAD - 20) * value / top
        x = PAD + 5 + i * bw
        bars.append(h("<rect class='bar' x='{:.1f}' y='{:.1f}' width='{:.1f}' height='{:.1f}' fill='{}'>"
                      "<title>{}: {:g}</title></rect>", x, H - PAD - bar_h, bw - 4, bar_h, COLORS[0], label, value))
        if i % 2 == 0:
            bars.append(h("<text x='{:.1f}' y='{}' text-anchor='middle'>{}</text>", x + bw / 2, H - PAD + 14, label))
    return _svg(concat([_axes(f.x_label, f.y_label), *bars]), f.id, f.caption)


def _log_x(v: float, lo: float, hi: float) -> float:
    return PAD + (W - PAD - 20) * (math.log10(v) - math.log10(lo)) / max(1e-9, math.log10(hi) - math.log10(lo))


def _line_chart(f: LineChart) -> Markup:
    points = [p for s in f.series for p in s.points]
    if not points:
        return h("<p class='note'>{}: nothing to draw</p>", f.caption)
    xs = [x for x, _ in points]
    lo, hi = min(xs), max(xs)
    if f.log_x:
        lo = max(lo, 1e-12)
        hi = max(hi, lo * 2)
    top = max([y for _, y in points] + [f.reference_line[1] if f.reference_line else 0]) or 1

    def x_of(v: float) -> float:
        if f.log_x:
            return _log_x(max(v, lo), lo, hi)
        return PAD + (W - PAD - 20) * (v - lo) / ((hi - lo) or 1)

    def y_of(v: float) -> float:
        return H - PAD - (H - PAD - 20) * v / top

    body = [_axes(f.x_label, f.y_label)]
    for i, s in enumerate(f.series):
        coords = " ".join(f"{x_of(x):.1f},{y_of(y):.1f}" for x, y in sorted(s.points))
        color = COLORS[i % len(COLORS)]
        body.append(h("<polyline class='series' points='{}' fill='none' stroke='{color}' stroke-width='2'>"
                      "<title>{label}</title></polyline><text x='{}' y='{}' fill='{color}'>{label}</text>",
                      coords, W - 160, 20 + 13 * i, color=color, label=s.label))
    if f.reference_line:
        label, value = f.reference_line
        y = y_of(value)
        body.append(h("<line id='ceiling-line' class='reference' x1='{pad}' y1='{y:.1f}' x2='{right}' y2='{y:.1f}' "
                      "stroke='#d62728' stroke-dasharray='6 4'/><text x='{text_x}' y='{text_y:.1f}'>{label} {value:.0f}"
                      "</text>", pad=PAD, y=y, right=W - 10, text_x=PAD + 6, text_y=y - 4, label=label,
                      value=value / f.y_divisor))
    if f.log_x:
        for tick in range(int(math.floor(math.log10(lo))), int(math.log10(hi)) + 1):
            v = 10 ** tick
            if lo <= v <= hi:
                body.append(h("<text x='{:.1f}' y='{}' text-anchor='middle'>1e{}</text>", x_of(v), H - PAD + 14, tick))
    body.append(h("<text x='{}' y='20' text-anchor='end'>{:.0f}</text>", PAD - 4, top / f.y_divisor))
    return _svg(concat(body), f.id, f.caption)


def _timeline(f: Timeline) -> Markup:
    longest = max([r.detect_s or 0 for r in f.rows] + [1]) * 1.2
    row_h = 28
    height = 30 + row_h * len(f.rows)
    body = []
    for i, r in enumerate(f.rows):
        y = 20 + i * row_h
        x0 = 170
        x1 = x0 + (W - x0 - 160) * (r.detect_s or 0) / longest
        body.append(h("<text x='4' y='{}'>{}</text><circle cx='{}' cy='{}' r='5' fill='#d62728'><title>injected: "
                      "{}</title></circle>", y + 14, r.label, x0, y + 10, r.injected))
        if r.detect_s is not None:
            body.append(h("<line x1='{x0}' y1='{y}' x2='{x1:.1f}' y2='{y}' stroke='#999' stroke-width='3'/>"
                          "<circle cx='{x1:.1f}' cy='{y}' r='5' fill='#1f77b4'><title>detected by {how} after "
                          "{det} s</title></circle>", x0=x0, x1=x1, y=y + 10, how=r.detected_by, det=r.detect_s))
        body.append(h("<text class='drill-row {}' x='{}' y='{}'>{} s; {}; {}</text>",
                      VERDICT_CLASS.get(str(r.verdict), ""), W - 150, y + 14,
                      r.detect_s if r.detect_s is not None else "-", r.note, str(r.verdict).upper()))
    return h("<figure><svg id='{id}' class='chart' width='{w}' height='{height}' "
             "viewBox='0 0 {w} {height}' xmlns='http://www.w3.org/2000/svg'>{body}</svg>"
             "<figcaption>{caption}</figcaption></figure>", id=f.id, w=W, height=height, body=concat(body),
             caption=f.caption)
