"""report.json -> one self-contained HTML page (inline CSS and SVG, no scripts from a CDN,
works offline). Rendered from the JSON alone, so `ddplab report report.json` can rebuild
any report later.

Sections: the verdict table (verdict, number, threshold, meaning, next step), the storm's
latency histogram, busbw vs message size with the copy-ceiling line, per-rank memory over
time, and the drill timeline (inject -> detect -> nothing left).
"""

from __future__ import annotations

import html
import json
import math

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


def render_html(doc: dict) -> str:
    r = doc["results"]
    p = doc.get("platform") or {}
    stages = {s["name"]: s for s in r.get("stages", [])}
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>ddplab report: {_e(doc['verdict'].upper())}</title><style>{CSS}</style></head><body>",
        f"<h1>ddplab {_e(doc['command'])} <span class='badge {VERDICT_CLASS.get(doc['verdict'], '')}' "
        f"id='overall-verdict'>{_e(doc['verdict'].upper())}</span></h1>",
        f"<div class='meta'>{_e(_machine_line(p))}<br>profile {_e(r.get('profile', ''))}, "
        f"{_e(doc.get('created_utc', ''))}, {r.get('duration_s', '?')} s"
        f"{' &mdash; <b>INTERRUPTED: partial report</b>' if r.get('interrupted') else ''}</div>",
        "<h2>Verdicts</h2>", _verdict_table(r.get("checks", [])),
        "<h2>Latency storm</h2>", _storm_section(stages),
        "<h2>Bus bandwidth vs message size</h2>", _busbw_section(stages),
        "<h2>Per-rank memory over time</h2>", _memory_section(stages),
        "<h2>Drill timeline</h2>", _drill_section(stages),
        "<h2>Stages</h2>", _stage_table(r.get("stages", [])),
        "<p class='note'>Every number comes from report.json beside this page; each stage's command line "
        "reproduces it alone. Bandwidths use GB = 1e9 bytes and nccl-tests' algbw/busbw definitions.</p>",
        f"<script type='application/json' id='report-data'>{_json_for_script(doc)}</script>",
        "</body></html>",
    ]
    return "\n".join(parts)


def _e(text) -> str:
    return html.escape(str(text))


def _badge(verdict: str) -> str:
    return f"<span class='badge {VERDICT_CLASS.get(verdict, '')}'>{_e(verdict.upper())}</span>"


def _json_for_script(doc: dict) -> str:
    return json.dumps(doc, default=str).replace("</", "<\\/")


def _machine_line(p: dict) -> str:
    if not p:
        return "platform unknown"
    devices = ", ".join(d.get("name", "?") for d in p.get("devices", []))
    return (f"{p.get('hostname', '')}: {p.get('device_count')} x {devices} ({p.get('vendor')}), torch "
            f"{p.get('torch_version')}, {p.get('collective_library')} {p.get('collective_loaded_version') or ''}")


def _verdict_table(rows: list[dict]) -> str:
    out = ["<table id='verdict-table'><thead><tr><th>stage</th><th>check</th><th>verdict</th><th>number</th>"
           "<th>threshold</th><th>what it means</th><th>next step</th></tr></thead><tbody>"]
    for r in rows:
        out.append(f"<tr class='check-row'><td>{_e(r['stage'])}</td><td>{_e(r['check'])}</td>"
                   f"<td>{_badge(r['verdict'])}</td><td>{_e(r['value'])}</td><td>{_e(r['threshold'])}</td><td>{_e(r['meaning'])}</td>"
                   f"<td>{_e(r['next_step'])}</td></tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _stage_table(stages: list[dict]) -> str:
    out = ["<table><thead><tr><th>stage</th><th>command</th><th>verdict</th><th>summary</th><th>s</th></tr>"
           "</thead><tbody>"]
    for s in stages:
        out.append(f"<tr><td>{_e(s['name'])}</td><td><code>{_e(s.get('command', ''))}</code></td>"
                   f"<td>{_badge(s['verdict'])}</td><td>{_e(s.get('summary', ''))}</td>"
                   f"<td>{_e(s.get('duration_s', ''))}</td></tr>")
    out.append("</tbody></table>")
    return "".join(out)


# --------------------------------------------------------------------------- charts (inline SVG)

W, H, PAD = 720, 260, 48


def _svg(body: str, chart_id: str, caption: str) -> str:
    return (f"<figure><svg id='{chart_id}' class='chart' width='{W}' height='{H}' viewBox='0 0 {W} {H}' "
            f"xmlns='http://www.w3.org/2000/svg' role='img'>{body}</svg><figcaption>{_e(caption)}</figcaption>"
            f"</figure>")


def _axes(x_label: str, y_label: str) -> str:
    return (f"<line x1='{PAD}' y1='{H - PAD}' x2='{W - 10}' y2='{H - PAD}' stroke='#333'/>"
            f"<line x1='{PAD}' y1='10' x2='{PAD}' y2='{H - PAD}' stroke='#333'/>"
            f"<text x='{W / 2}' y='{H - 8}' text-anchor='middle'>{_e(x_label)}</text>"
            f"<text x='12' y='{H / 2}' transform='rotate(-90 12 {H / 2})' text-anchor='middle'>{_e(y_label)}</text>")


def _storm_section(stages: dict) -> str:
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
            h = (H - PAD - 20) * c / top
            x = PAD + 5 + i * bw
            bars.append(f"<rect class='bar' x='{x:.1f}' y='{H - PAD - h:.1f}' width='{bw - 4:.1f}' height='{h:.1f}' "
                        f"fill='{COLORS[0]}'><title>{labels[i]} us: {c}</title></rect>")
            if i % 2 == 0:
                bars.append(f"<text x='{x + bw / 2:.1f}' y='{H - PAD + 14}' text-anchor='middle'>{labels[i]}</text>")
        thr = r["threshold_us"]
        caption = (f"{name}: {r['per_op_us']['n']} ops per rank, per-op blocking latency (us, log bins); mean "
                   f"{r['mean_us']:.1f} us pipelined vs threshold {thr:.0f} us; backend {r['backend']}")
        figs.append(_svg(_axes("latency per op (us)", "ops") + "".join(bars), f"storm-hist-{_e(name)}", caption))
    return "".join(figs) or "<p class='note'>no storm stage in this report</p>"


def _log_x(v: float, lo: float, hi: float) -> float:
    return PAD + (W - PAD - 20) * (math.log10(v) - math.log10(lo)) / max(1e-9, math.log10(hi) - math.log10(lo))


def _busbw_section(stages: dict) -> str:
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
        top = max([x[key] or 0 for x in rows] + [ceiling or 0]) or 1
        series = {}
        for x in rows:
            series.setdefault(f"{x['op']} {'in' if x['in_place'] else 'out'}", []).append(x)
        body = [_axes("message size (bytes, log)", f"{key.split('_')[0]} (GB/s)")]
        for i, (label, pts) in enumerate(sorted(series.items())):
            pts = sorted(pts, key=lambda x: x["size_bytes"])
            coords = " ".join(f"{_log_x(x['size_bytes'], lo, hi):.1f},"
                              f"{H - PAD - (H - PAD - 20) * (x[key] or 0) / top:.1f}" for x in pts)
            color = COLORS[i % len(COLORS)]
            body.append(f"<polyline class='series' points='{coords}' fill='none' stroke='{color}' stroke-width='2'>"
                        f"<title>{_e(label)}</title></polyline>")
            body.append(f"<text x='{W - 160}' y='{20 + 13 * i}' fill='{color}'>{_e(label)}</text>")
        if ceiling:
            y = H - PAD - (H - PAD - 20) * ceiling / top
            body.append(f"<line id='ceiling-line' x1='{PAD}' y1='{y:.1f}' x2='{W - 10}' y2='{y:.1f}' stroke='#d62728' "
                        f"stroke-dasharray='6 4'/><text x='{PAD + 6}' y='{y - 4:.1f}'>copy ceiling "
                        f"{ceiling:.0f} GB/s</text>")
        for tick in range(int(math.log10(lo)), int(math.log10(hi)) + 1):
            v = 10 ** tick
            if lo <= v <= hi:
                x = _log_x(v, lo, hi)
                body.append(f"<text x='{x:.1f}' y='{H - PAD + 14}' text-anchor='middle'>1e{tick}</text>")
        body.append(f"<text x='{PAD - 4}' y='20' text-anchor='end'>{top:.0f}</text>")
        caption = (f"{name}: {r['world_size']} ranks, backend {r['backend']}, time {r['mode']}, dtype {r['dtype']}"
                   + ("; dashed: device copy ceiling (ddplab ceiling method)" if ceiling else ""))
        figs.append(_svg("".join(body), f"busbw-{_e(name)}", caption))
    return "".join(figs) or "<p class='note'>no sweep stage in this report</p>"


def _memory_section(stages: dict) -> str:
    for name, s in stages.items():
        doc = s.get("report") or {}
        samples = ((doc.get("results") or {}).get("timeseries") or {}).get("samples") or []
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
            body.append(f"<polyline class='series' points='{coords}' fill='none' stroke='{COLORS[i % 8]}' "
                        f"stroke-width='2'><title>rank {rank}</title></polyline>"
                        f"<text x='{W - 80}' y='{20 + 13 * i}' fill='{COLORS[i % 8]}'>rank {rank}</text>")
        body.append(f"<text x='{PAD - 4}' y='20' text-anchor='end'>{top / 2**20:.0f}</text>")
        caption = (f"{name}: sampled every {doc['results']['timeseries']['interval_s']} s "
                   f"({doc['results']['timeseries']['method']})")
        return _svg("".join(body), "memory-over-time", caption)
    return "<p class='note'>no train stage with samples in this report</p>"


def _drill_section(stages: dict) -> str:
    drills = [d for s in stages.values() if (s.get("report") or {}).get("command") == "drill"
              for d in s["report"]["results"]["drills"]]
    if not drills:
        return "<p class='note'>no drill stage in this report</p>"
    longest = max([d.get("detect_s") or 0 for d in drills] + [1]) * 1.2
    row_h = 28
    height = 30 + row_h * len(drills)
    body = []
    for i, d in enumerate(drills):
        y = 20 + i * row_h
        det = d.get("detect_s")
        x0 = 170
        x1 = x0 + (W - x0 - 160) * (det or 0) / longest
        badge = VERDICT_CLASS.get(d["verdict"], "")
        body.append(f"<text x='4' y='{y + 14}'>{_e(d['drill'])}</text>"
                    f"<circle cx='{x0}' cy='{y + 10}' r='5' fill='#d62728'><title>injected: "
                    f"{_e((d.get('injected') or {}).get('what'))}</title></circle>")
        if det is not None:
            body.append(f"<line x1='{x0}' y1='{y + 10}' x2='{x1:.1f}' y2='{y + 10}' stroke='#999' stroke-width='3'/>"
                        f"<circle cx='{x1:.1f}' cy='{y + 10}' r='5' fill='#1f77b4'><title>detected by "
                        f"{_e(d.get('detected_by'))} after {det} s</title></circle>")
        leaks = len(d.get("leaked_pids") or [])
        body.append(f"<text class='drill-row {badge}' x='{W - 150}' y='{y + 14}'>{det if det is not None else '-'} s; "
                    f"{'clean' if not leaks else f'{leaks} leaked'}; {d['verdict'].upper()}</text>")
    svg = (f"<figure><svg id='drill-timeline' class='chart' width='{W}' height='{height}' "
           f"viewBox='0 0 {W} {height}' xmlns='http://www.w3.org/2000/svg'>{''.join(body)}</svg>"
           f"<figcaption>red: fault injected; blue: first detection (mechanism in the tooltip); right: seconds "
           f"to detection, processes left, verdict</figcaption></figure>")
    return svg
