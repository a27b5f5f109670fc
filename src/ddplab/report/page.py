"""A report (records.Report) -> one self-contained HTML page (inline CSS and SVG, no script runs, works
offline). Rendered from the records alone, so `ddplab report report.json` can rebuild any report later.

The first screen is the answer (summary.py): the overall verdict, the checks that failed or warned with
their next step, the key figures as large numbers; then every check by stage, collapsed; then the charts the
records offer (records/figures.py, drawn by charts.py: time and bus bandwidth against message size per
collective, the storm's latency distribution, per-rank memory and CPU time, the drills, a hung job's
collectives per rank); then the stages. A baseline (another run, nccl-tests) is drawn dashed beside this
run's lines (``overlay``). Beside a `ddplab launch` page, ``write_page`` writes the job's flight
records as a Chrome trace-event file (flight_timeline.py).

Every value from the document reaches the page through markup.py's ``h()``, which escapes all of them;
tests/unit/test_page.py checks that every template is a literal and that ``Markup()`` wraps only the
CSS and the JSON data block. `ddplab report` reads the document through the records first (catalog.read_report),
so the numbers here are numbers.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from .markup import Markup, badge, concat, h, json_for_script
from ..records import Check, Report
from ..records.compare import BaselineRows
from ..records.core import rows_of
from ..records.figures import LineChart, Series
from ..records.hooks import Drawn, Interruptible

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:20px 28px;color:#222;max-width:1240px}
h1{margin:0;font-size:26px;display:flex;align-items:center;gap:14px}h2{margin-top:28px;border-bottom:1px solid #ddd;
padding-bottom:4px;font-size:19px}.meta{color:#555;font-size:13px;margin-top:4px}
.badge{display:inline-block;padding:1px 8px;border-radius:4px;font-weight:700;font-size:12px}
.verdict-big{font-size:22px;padding:4px 16px;border-radius:6px}.counts{font-size:16px;font-weight:400;color:#444}
.pass{background:#d4f4dd;color:#135d2a}.warn{background:#fff1c2;color:#7a5a00}.fail{background:#ffd6d6;color:#8a1010}
.skip{background:#eee;color:#666}.info{background:#e3edf9;color:#234a78}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{border:1px solid #ddd;padding:4px 6px;text-align:left;
vertical-align:top}th{background:#f5f5f5}
.attention{display:flex;flex-direction:column;gap:6px;margin-top:12px}.finding{border-left:5px solid #d62728;
background:#fff8f8;padding:6px 10px;font-size:14px}.finding.warn{border-color:#e0a800;background:#fffbea}
.finding .next{margin-top:2px}.finding .next b{color:#8a1010}.finding.warn .next b{color:#7a5a00}
.finding .what{color:#555;font-size:12px}.all-clear{font-size:14px;color:#135d2a;margin-top:10px}
.figures-row{display:flex;flex-wrap:wrap;gap:10px;margin-top:14px}.tile{border:1px solid #ddd;border-radius:6px;
padding:8px 12px;min-width:170px;max-width:290px;flex:1}.tile .label{font-size:12px;color:#555}
.tile .value{font-size:28px;font-weight:700;line-height:1.25}.tile .detail{font-size:11.5px;color:#666}
.tile.fail{border-color:#d62728}.tile.pass{border-color:#2ca02c}
details.stage{border:1px solid #e3e3e3;border-radius:4px;margin:4px 0;padding:2px 8px}details.stage summary{
cursor:pointer;font-size:14px;padding:3px 0}details.stage table{margin:4px 0 8px 0}
.charts{display:flex;flex-wrap:wrap;gap:8px 18px}figure{margin:8px 0}figure.wide{flex-basis:100%}
figcaption{font-size:12px;color:#555;max-width:580px}figure.wide figcaption{max-width:none}
svg text{font-size:11px;fill:#333}svg .axis-label{font-size:12px;fill:#222}svg .mark-label{font-size:10.5px}
.note{font-size:12px;color:#666}.figure-table td{white-space:pre-wrap}.headline{font-size:15px;font-weight:600;
color:#8a1010;margin:6px 0}
"""


# ------------------------------------------------------------------------------------------------ files

def trace_path(html_path: Path) -> Path:
    """Where a page's trace-event file goes: report.html -> report.trace.json."""
    return html_path.with_name(html_path.stem + ".trace.json")


def write_page(report: Report, html_path: str | Path, baseline: BaselineRows | None = None,
               base_dir: Path | None = None) -> list[Path]:
    """report.html and, for a job with flight records, its trace-event file beside it; each written atomically
    (the trace first, so the page never links to a file that is not there). ``base_dir``: the report.json's
    directory, where its own files are looked for when their recorded paths are gone (default: the page's).
    Returns the files written."""
    from .. import __version__
    from ..files import write_text_atomic
    from .flight_timeline import trace_events
    from ..records.launch import LaunchRecord

    html_path = Path(html_path)
    base_dir = base_dir if base_dir is not None else html_path.parent
    written = []
    trace_name = ""
    if isinstance(report.results, LaunchRecord):
        trace = trace_events(report.results, base_dir, __version__)
        if trace is not None:
            written.append(write_text_atomic(trace_path(html_path), json.dumps(trace, indent=1)))
            trace_name = trace_path(html_path).name
    page = render_html(report, baseline=baseline, base_dir=base_dir, trace_name=trace_name)
    written.insert(0, write_text_atomic(html_path, page))
    return written


# ------------------------------------------------------------------------------------------------ the page

def render_html(report: Report, baseline: BaselineRows | None = None, base_dir: Path | None = None,
                trace_name: str = "") -> str:
    """The page of any report: a `ddplab run` report (its stages), or one command's report as one stage.
    ``baseline``: records.compare.BaselineRows to draw beside this run; ``base_dir``: where the report's own files
    are when their recorded paths are gone (a report moved to another machine); ``trace_name``: the trace-event
    file beside the page, linked from the hang timeline."""
    from .first_screen import first_screen, stage_groups
    from .summary import summarise

    stages, checks = _stages_and_checks(report)
    figures = _unique_ids(_figures(stages, base_dir, trace_name))
    figures, overlaid = overlay(figures, baseline)
    summary = summarise(report, checks, stages)
    r = report.results
    run = getattr(r, "stages", None) is not None
    duration = getattr(r, "duration_s", None)
    profile = getattr(r, "profile", "") if run else ""
    only = getattr(report.config, "only", ())  # `run --only`: the page says the profile was cut
    profile += f" (only {', '.join(only)})" if profile and only else ""
    meta = ", ".join(x for x in (f"profile {profile}" if profile and not profile.startswith("(") else "",
                                 report.created_utc,
                                 f"{duration} s" if duration is not None else "") if x)
    parts = [
        h("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"),
        h("<title>ddplab report: {}</title><style>{}</style></head><body>", str(report.verdict).upper(), Markup(CSS)),
        first_screen(report, summary, _machine_line(report), meta, isinstance(r, Interruptible) and r.interrupted),
        _baseline_note(baseline, overlaid),
        h("<h2>Every check, by stage</h2><div id='verdict-table'>{}</div>", stage_groups(summary)),
        *_figure_sections(figures),
        h("<h2>Stages</h2><details class='stage'><summary>{} stage(s), with the command line that reproduces each"
          "</summary>{}</details>", len(stages), _stage_table(report, stages)),
        h("<p class='note'>Every number comes from report.json beside this page; each stage's command line "
          "reproduces it alone. Bandwidths use GB = 1e9 bytes and nccl-tests' algbw/busbw definitions.</p>"),
        h("<script type='application/json' id='report-data'>{}</script>", Markup(json_for_script(report.to_json()))),
        h("</body></html>"),
    ]
    return str(concat(parts, lines=True))


def _stages_and_checks(report: Report) -> tuple[list[tuple], list[Check]]:
    """(name, report, stage record) of each stage, and the verdict table's rows: a lab's own (judged again from
    each stage's data when the report was read back: catalog.read_report), or one report's (records.core.rows_of)."""
    run = getattr(report.results, "stages", None)
    if run is not None:
        return [(s.name, s.report, s) for s in run], list(report.results.checks)
    return [(report.command, report, None)], [replace(c, stage=report.command) for c in rows_of(report)]


def _figures(stages: list[tuple], base_dir: Path | None, trace_name: str) -> list:
    from .launch_figures import launch_figures
    from ..records.launch import LaunchRecord

    out = []
    for name, rep, _ in stages:
        results = rep.results if rep is not None else None
        if isinstance(results, LaunchRecord):
            out.extend(launch_figures(results, name, base_dir, trace_name))
        elif isinstance(results, Drawn):
            out.extend(results.figures(name))
    return out


def overlay(figures: list, baseline: BaselineRows | None) -> tuple[list, int]:
    """The figures with the baseline's lines added where they have its op; and how many charts got one.

    A chart names the op as `compare` names it in its report ("sweep-shared:all_reduce" for a lab stage whose
    name is not its command) and the bare op ("all_reduce"): a baseline of the same kind of report lines up stage
    by stage; nccl-tests output, which knows no stages, lines up by the bare op."""
    if baseline is None:
        return figures, 0
    out, drawn = [], 0
    for f in figures:
        series = _series_for(f, baseline) if isinstance(f, LineChart) and f.overlay else []
        if series:
            f, drawn = replace(f, series=[*f.series, *series]), drawn + 1
        out.append(f)
    return out, drawn


def _series_for(chart: LineChart, baseline: BaselineRows) -> list[Series]:
    wanted = chart.overlay
    rows = [r for r in baseline.rows if r.op == wanted.op] or [r for r in baseline.rows if r.op == wanted.bare_op]
    out = []
    for in_place in (False, True):
        points = sorted((float(r.size_bytes), value) for r in rows if r.in_place is in_place and r.size_bytes
                        for value in [getattr(r, wanted.value)] if value)
        if points:
            out.append(Series(f"baseline {'in' if in_place else 'out'}", points, baseline=True))
    return out


def _baseline_note(baseline, overlaid: int) -> Markup:
    if baseline is None:
        return h("")
    if not overlaid:
        return h("<p class='note' id='baseline-note'>Baseline {}: none of this report's charts has a collective it "
                 "measured.</p>", baseline.label)
    return h("<p class='note' id='baseline-note'>Baseline {}: dashed grey lines on {} chart(s).</p>", baseline.label,
             overlaid)


def _machine_line(report: Report) -> str:
    p, config = report.platform, report.config
    if p is None and hasattr(config, "old") and hasattr(config, "new"):  # compare: two files, no machine
        return f"A (dashed): {config.old}; B (solid): {config.new}"
    if p is None:
        return "platform not recorded"
    own = getattr(p, "machine_line", None)  # a record that is not a probed Platform (a job's launcher host)
    if callable(own):
        return own()
    devices = ", ".join(str(d.name) for d in p.devices)
    library = " ".join(str(x) for x in (p.collective_library, p.collective_loaded_version) if x)
    return f"{p.hostname}: {p.device_count} x {devices} ({p.vendor}), torch {p.torch_version}, {library}".rstrip(", ")


def _stage_table(report: Report, stages: list[tuple]) -> Markup:
    out = [h("<table id='stage-table'><thead><tr><th>stage</th><th>command</th><th>verdict</th><th>summary</th>"
             "<th>seconds</th></tr></thead><tbody>")]
    for name, rep, stage in stages:
        if stage is not None:
            command, verdict, summary, duration = stage.command, stage.verdict, stage.summary, stage.duration_s
        else:
            command = " ".join(["ddplab", report.command, *report.argv[1:]])
            verdict, summary, duration = report.verdict, "", getattr(report.results, "duration_s", None)
        out.append(h("<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>", name, command,
                     badge(verdict), summary, "" if duration is None else duration))
    out.append(h("</tbody></table>"))
    return concat(out)


def _unique_ids(figures: list) -> list:
    """Element ids must be unique on a page: a repeated one gets -2, -3... (the first keeps its name)."""
    seen: dict[str, int] = {}
    out = []
    for f in figures:
        seen[f.id] = seen.get(f.id, 0) + 1
        out.append(f if seen[f.id] == 1 else replace(f, id=f"{f.id}-{seen[f.id]}"))
    return out


def _figure_sections(figures: list) -> list[Markup]:
    """Figures grouped under their section headings, in order of first appearance; side by side where they fit."""
    from .charts import draw

    sections: dict[str, list] = {}
    for f in figures:
        sections.setdefault(f.section, []).append(f)
    return [h("<h2>{}</h2><div class='charts'>{}</div>", title, concat(draw(f) for f in group))
            for title, group in sections.items()]
