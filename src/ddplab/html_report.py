"""report.json -> one self-contained HTML page (inline CSS and SVG, no scripts from a CDN,
works offline). Rendered from the JSON alone, so `ddplab report report.json` can rebuild
any report later.

Sections: the verdict table (verdict, number, threshold, meaning, next step), the storm's
latency histogram, busbw vs message size with the copy-ceiling line, per-rank memory over
time, and the drill timeline (inject -> detect -> nothing left).

Every value from the document reaches the page through ``h()``, which escapes all of them
(numbers too); only ``Markup`` (fragments ``h()`` built from this module's own templates)
is inserted as is, and anything else handed to ``concat()`` is escaped as text. A value
interpolated any other way (an f-string, ``+``) is a plain string, which ``concat()``
escapes: an unescaped value cannot reach the page by omission. tests/unit/test_html_report.py
checks that every template is a literal and that ``Markup()`` wraps only the CSS and the
JSON data block. `ddplab report` checks the document's shape first (report_schema.py), so
the numbers here are numbers.
"""

from __future__ import annotations

import html
import json
import math
import string
from typing import Iterable

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
.note{font-size:12px;color:#666}
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


def render_html(doc: dict) -> str:
    r = doc["results"]
    p = doc.get("platform") or {}
    stages = {s["name"]: s for s in r.get("stages", [])}
    verdict = doc["verdict"]
    parts = [
        h("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"),
        h("<title>ddplab report: {}</title><style>{}</style></head><body>", verdict.upper(), Markup(CSS)),
        h("<h1>ddplab {} <span class='badge {}' id='overall-verdict'>{}</span></h1>", doc["command"],
          VERDICT_CLASS.get(verdict, ""), verdict.upper()),
        h("<div class='meta'>{}<br>profile {}, {}, {} s{}</div>", _machine_line(p), r.get("profile", ""),
          doc.get("created_utc", ""), r.get("duration_s", "?"),
          h(" &mdash; <b>INTERRUPTED: partial report</b>") if r.get("interrupted") else ""),
        h("<h2>Verdicts</h2>"), _verdict_table(r.get("checks", [])),
        h("<h2>Latency storm</h2>"), _storm_section(stages),
        h("<h2>Bus bandwidth vs message size</h2>"), _busbw_section(stages),
        h("<h2>Per-rank memory over time</h2>"), _memory_section(stages),
        h("<h2>Drill timeline</h2>"), _drill_section(stages),
        h("<h2>Stages</h2>"), _stage_table(r.get("stages", [])),
        h("<p class='note'>Every number comes from report.json beside this page; each stage's command line "
          "reproduces it alone. Bandwidths use GB = 1e9 bytes and nccl-tests' algbw/busbw definitions.</p>"),
        h("<script type='application/json' id='report-data'>{}</script>", Markup(json_for_script(doc))),
        h("</body></html>"),
    ]
    return str(concat(parts, lines=True))


def _badge(verdict: str) -> Markup:
    return h("<span class='badge {}'>{}</span>", VERDICT_CLASS.get(verdict, ""), verdict.upper())


def json_for_script(doc: dict) -> str:
    """The document as JSON that cannot end its <script> element: "</script", "<!--" and
    "-->" need < and >, which JSON spells as \\u003c / \\u003e inside strings (the only place
    they can occur); & likewise. ensure_ascii writes U+2028/2029 as \\u escapes too."""
    text = json.dumps(doc, default=str, ensure_ascii=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _machine_line(p: dict) -> str:
    if not p:
        return "platform unknown"
    devices = ", ".join(str(d.get("name", "?")) for d in p.get("devices", []))
    return (f"{p.get('hostname', '')}: {p.get('device_count')} x {devices} ({p.get('vendor')}), torch "
            f"{p.get('torch_version')}, {p.get('collective_library')} {p.get('collective_loaded_version') or ''}")


def _verdict_table(rows: list[dict]) -> Markup:
    out = [h("<table id='verdict-table'><thead><tr><th>stage</th><th>check</th><th>verdict</th><th>number</th>"
             "<th>threshold</th><th>what it means</th><th>next step</th></tr></thead><tbody>")]
    for r in rows:
        out.append(h("<tr class='check-row'><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
                     "<td>{}</td></tr>", r["stage"], r["check"], _badge(r["verdict"]), r["value"], r["threshold"],
                     r["meaning"], r["next_step"]))
    out.append(h("</tbody></table>"))
    return concat(out)


def _stage_table(stages: list[dict]) -> Markup:
    out = [h("<table><thead><tr><th>stage</th><th>command</th><th>verdict</th><th>summary</th><th>s</th></tr>"
             "</thead><tbody>")]
    for s in stages:
        out.append(h("<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>", s["name"],
                     s.get("command", ""), _badge(s["verdict"]), s.get("summary", ""), s.get("duration_s", "")))
    out.append(h("</tbody></table>"))
    return concat(out)


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


def _storm_section(stages: dict) -> Markup:
    figs = []
    for name, s in stages.items():
        r = ((s.get("report") or {}).get("results") or {})
        hist = r.get("per_op_histogram")
        if (s.get("report") or {}).get("command") != "storm" or not hist:
            continue
        counts, edges = hist["counts"], hist["edges_us"]
        labels = [f"<{edges[0]}"] + [f"{a}-{b}" for a, b in zip(edges, edges[1:])] + [f">{edges[-1]}"]
        top = max(counts) or 1
        bw = (W - PAD - 20) / len(counts)
        bars = []
        for i, c in enumerate(counts):
            bar_h = (H - PAD - 20) * c / top
            x = PAD + 5 + i * bw
            bars.append(h("<rect class='bar' x='{:.1f}' y='{:.1f}' width='{:.1f}' height='{:.1f}' fill='{}'>"
                          "<title>{} us: {}</title></rect>", x, H - PAD - bar_h, bw - 4, bar_h, COLORS[0],
                          labels[i], c))
            if i % 2 == 0:
                bars.append(h("<text x='{:.1f}' y='{}' text-anchor='middle'>{}</text>", x + bw / 2, H - PAD + 14,
                              labels[i]))
        caption = (f"{name}: {r['per_op_us']['n']} ops per rank, per-op blocking latency (us, log bins); mean "
                   f"{r['mean_us']:.1f} us pipelined vs threshold {r['threshold_us']:.0f} us; backend "
                   f"{r.get('backend')}")
        figs.append(_svg(concat([_axes("latency per op (us)", "ops"), *bars]), f"storm-hist-{name}", caption))
    return concat(figs) if figs else h("<p class='note'>no storm stage in this report</p>")


def _log_x(v: float, lo: float, hi: float) -> float:
    return PAD + (W - PAD - 20) * (math.log10(v) - math.log10(lo)) / max(1e-9, math.log10(hi) - math.log10(lo))


def _busbw_section(stages: dict) -> Markup:
    figs = []
    for name, s in stages.items():
        doc = s.get("report") or {}
        if doc.get("command") != "sweep":
            continue
        r = doc["results"]
        rows = [x for x in r["rows"] if x.get("busbw_gbps") is not None or x.get("algbw_gbps") is not None]
        if not rows:
            continue
        key = "busbw_gbps" if any(x.get("busbw_gbps") is not None for x in rows) else "algbw_gbps"
        ceiling = (r.get("ceiling") or {}).get("gbps")
        lo, hi = min(x["size_bytes"] for x in rows), max(x["size_bytes"] for x in rows)
        hi = max(hi, lo * 2)
        top = max([x.get(key) or 0 for x in rows] + [ceiling or 0]) or 1
        series = {}
        for x in rows:
            series.setdefault(f"{x['op']} {'in' if x['in_place'] else 'out'}", []).append(x)
        body = [_axes("message size (bytes, log)", f"{key.split('_')[0]} (GB/s)")]
        for i, (label, pts) in enumerate(sorted(series.items())):
            pts = sorted(pts, key=lambda x: x["size_bytes"])
            coords = " ".join(f"{_log_x(x['size_bytes'], lo, hi):.1f},"
                              f"{H - PAD - (H - PAD - 20) * (x.get(key) or 0) / top:.1f}" for x in pts)
            color = COLORS[i % len(COLORS)]
            body.append(h("<polyline class='series' points='{}' fill='none' stroke='{color}' stroke-width='2'>"
                          "<title>{label}</title></polyline><text x='{}' y='{}' fill='{color}'>{label}</text>",
                          coords, W - 160, 20 + 13 * i, color=color, label=label))
        if ceiling:
            y = H - PAD - (H - PAD - 20) * ceiling / top
            body.append(h("<line id='ceiling-line' x1='{pad}' y1='{y:.1f}' x2='{right}' y2='{y:.1f}' stroke='#d62728' "
                          "stroke-dasharray='6 4'/><text x='{text_x}' y='{text_y:.1f}'>copy ceiling {gbps:.0f} GB/s"
                          "</text>", pad=PAD, y=y, right=W - 10, text_x=PAD + 6, text_y=y - 4, gbps=ceiling))
        for tick in range(int(math.log10(lo)), int(math.log10(hi)) + 1):
            v = 10 ** tick
            if lo <= v <= hi:
                body.append(h("<text x='{:.1f}' y='{}' text-anchor='middle'>1e{}</text>", _log_x(v, lo, hi),
                              H - PAD + 14, tick))
        body.append(h("<text x='{}' y='20' text-anchor='end'>{:.0f}</text>", PAD - 4, top))
        caption = (f"{name}: {r.get('world_size')} ranks, backend {r.get('backend')}, time {r.get('mode')}, dtype "
                   f"{r.get('dtype')}" + ("; dashed: device copy ceiling (ddplab ceiling method)" if ceiling else ""))
        figs.append(_svg(concat(body), f"busbw-{name}", caption))
    return concat(figs) if figs else h("<p class='note'>no sweep stage in this report</p>")


def _memory_section(stages: dict) -> Markup:
    for name, s in stages.items():
        doc = s.get("report") or {}
        timeseries = (doc.get("results") or {}).get("timeseries") or {}
        samples = timeseries.get("samples") or []
        if doc.get("command") != "train" or not samples:
            continue
        use_device = any(rk.get("device_mem_bytes") for smp in samples for rk in smp["ranks"])
        key = "device_mem_bytes" if use_device else "rss_bytes"
        series: dict[int, list[tuple[float, int]]] = {}
        for smp in samples:
            for rk in smp["ranks"]:
                if rk.get(key) is not None:
                    series.setdefault(rk["rank"], []).append((smp["t_s"], rk[key]))
        if not series:
            continue
        t_max = max(t for pts in series.values() for t, _ in pts) or 1
        top = max(v for pts in series.values() for _, v in pts) or 1
        body = [_axes("time (s)", f"{'device memory' if use_device else 'host RSS'} (MiB)")]
        for i, (rank, pts) in enumerate(sorted(series.items())):
            coords = " ".join(f"{PAD + (W - PAD - 20) * t / t_max:.1f},{H - PAD - (H - PAD - 20) * v / top:.1f}"
                              for t, v in pts)
            body.append(h("<polyline class='series' points='{}' fill='none' stroke='{color}' stroke-width='2'>"
                          "<title>rank {rank}</title></polyline><text x='{}' y='{}' fill='{color}'>rank {rank}"
                          "</text>", coords, W - 80, 20 + 13 * i, color=COLORS[i % 8], rank=rank))
        body.append(h("<text x='{}' y='20' text-anchor='end'>{:.0f}</text>", PAD - 4, top / 2**20))
        caption = f"{name}: sampled every {timeseries.get('interval_s')} s ({timeseries.get('method')})"
        return _svg(concat(body), "memory-over-time", caption)
    return h("<p class='note'>no train stage with samples in this report</p>")


def _drill_section(stages: dict) -> Markup:
    drills = [d for s in stages.values() if (s.get("report") or {}).get("command") == "drill"
              for d in s["report"]["results"]["drills"]]
    if not drills:
        return h("<p class='note'>no drill stage in this report</p>")
    longest = max([d.get("detect_s") or 0 for d in drills] + [1]) * 1.2
    row_h = 28
    height = 30 + row_h * len(drills)
    body = []
    for i, d in enumerate(drills):
        y = 20 + i * row_h
        det = d.get("detect_s")
        x0 = 170
        x1 = x0 + (W - x0 - 160) * (det or 0) / longest
        body.append(h("<text x='4' y='{}'>{}</text><circle cx='{}' cy='{}' r='5' fill='#d62728'><title>injected: "
                      "{}</title></circle>", y + 14, d["drill"], x0, y + 10, (d.get("injected") or {}).get("what")))
        if det is not None:
            body.append(h("<line x1='{x0}' y1='{y}' x2='{x1:.1f}' y2='{y}' stroke='#999' stroke-width='3'/>"
                          "<circle cx='{x1:.1f}' cy='{y}' r='5' fill='#1f77b4'><title>detected by {how} after "
                          "{det} s</title></circle>", x0=x0, x1=x1, y=y + 10, how=d.get("detected_by"), det=det))
        leaks = len(d.get("leaked_pids") or [])
        body.append(h("<text class='drill-row {}' x='{}' y='{}'>{} s; {}; {}</text>",
                      VERDICT_CLASS.get(d["verdict"], ""), W - 150, y + 14, det if det is not None else "-",
                      f"{leaks} leaked" if leaks else "clean", d["verdict"].upper()))
    return h("<figure><svg id='drill-timeline' class='chart' width='{w}' height='{height}' "
             "viewBox='0 0 {w} {height}' xmlns='http://www.w3.org/2000/svg'>{body}</svg>"
             "<figcaption>red: fault injected; blue: first detection (mechanism in the tooltip); right: seconds "
             "to detection, processes left, verdict</figcaption></figure>", w=W, height=height, body=concat(body))
