"""A report (records.Report) -> one self-contained HTML page (inline CSS and SVG, no script runs, works
offline), rendered from the records alone so `ddplab report report.json` can rebuild any report later.

The first screen is the answer (summary.py): the verdict, the checks that failed or warned with their next step, the
key figures; then every check by stage, collapsed; then the charts the records offer (charts.py), a baseline drawn
dashed beside them; then the stages. Beside a `ddplab launch` page goes the job's trace-event file.

The page is Jinja2 templates (templates/) with autoescape on, the one place a value from the document is escaped:
the templates mark nothing safe, and the charts come as MarkupSafe markup escaped by the same library.
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from jinja2 import Environment, PackageLoader, StrictUndefined

from ..records import Check, Report
from ..records.core import Drawn, Interruptible, rows_of
from ..records.figures import LineChart, Series

if TYPE_CHECKING:  # a baseline's records: read only for --baseline (reading/comparison.py)
    from ..records.compare import BaselineRows


# ------------------------------------------------------------------------------------------------ templates

@functools.cache
def environment() -> Environment:
    """The page's templates (templates/, package data), every value autoescaped. The JSON data block is written by
    Jinja2's ``tojson``: <, >, & and ' spelled as \\u escapes, so no string in it can end its <script> element."""
    env = Environment(loader=PackageLoader("ddplab.report"), autoescape=True, trim_blocks=True, lstrip_blocks=True,
                      undefined=StrictUndefined)
    env.policies["json.dumps_kwargs"] = {"ensure_ascii": True, "default": str}
    return env


# ------------------------------------------------------------------------------------------------ files

def write_page(report: Report, html_path: str | Path, baseline: BaselineRows | None = None,
               base_dir: Path | None = None) -> list[Path]:
    """report.html and, for a job with flight records, its trace-event file beside it, each atomic (the trace first,
    so the page never links to a missing file). ``base_dir``: where the report's own files are looked for when their
    recorded paths are gone (default: the page's directory). Returns the files written."""
    from ..basics.files import write_text_atomic

    html_path = Path(html_path)
    base_dir = base_dir if base_dir is not None else html_path.parent
    written = []
    trace_name = ""
    if report.command == "launch":
        from .. import __version__
        from .flight_timeline import trace_events

        trace = trace_events(report.results, base_dir, __version__)
        if trace is not None:  # report.html -> report.trace.json
            trace_name = html_path.stem + ".trace.json"
            written.append(write_text_atomic(html_path.with_name(trace_name), json.dumps(trace, indent=1)))
    page = render_html(report, baseline=baseline, base_dir=base_dir, trace_name=trace_name)
    written.insert(0, write_text_atomic(html_path, page))
    return written


# ------------------------------------------------------------------------------------------------ the page

def render_html(report: Report, baseline: BaselineRows | None = None, base_dir: Path | None = None,
                trace_name: str = "") -> str:
    """The page of any report: a `ddplab run` report (its stages), or one command's report as one stage.
    ``base_dir``: where the report's own files are when their recorded paths are gone; ``trace_name``: the trace-event
    file beside the page, linked from the hang timeline."""
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
    return environment().get_template("page.html").render(
        report=report, summary=summary, machine=_machine_line(report), meta=meta,
        interrupted=isinstance(r, Interruptible) and r.interrupted, baseline=baseline, overlaid=overlaid,
        sections=_figure_sections(figures), stage_rows=_stage_rows(report, stages))


def _stages_and_checks(report: Report) -> tuple[list[tuple], list[Check]]:
    """(name, report, stage record) of each stage, and the verdict table's rows: a lab's own, or one report's."""
    run = getattr(report.results, "stages", None)
    if run is not None:
        return [(s.name, s.report, s) for s in run], list(report.results.checks)
    return [(report.command, report, None)], [replace(c, stage=report.command) for c in rows_of(report)]


def _figures(stages: list[tuple], base_dir: Path | None, trace_name: str) -> list:
    out = []
    for name, rep, _ in stages:
        results = rep.results if rep is not None else None
        if rep is not None and rep.command == "launch":
            from .flight_timeline import launch_figures  # a job's flight records: read for a launch report alone

            out.extend(launch_figures(results, name, base_dir, trace_name))
        elif isinstance(results, Drawn):
            out.extend(results.figures(name))
    return out


def overlay(figures: list, baseline: BaselineRows | None) -> tuple[list, int]:
    """The figures with the baseline's lines added where they have its op, and how many charts got one. A baseline
    report lines up stage by stage ("sweep-shared:all_reduce"); nccl-tests output, which has no stages, by bare op."""
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


def _stage_rows(report: Report, stages: list[tuple]) -> list[tuple]:
    """(stage, command line, verdict, summary, seconds) of each stage, for the page's table of stages."""
    out = []
    for name, rep, stage in stages:
        if stage is not None:
            out.append((name, stage.command, stage.verdict, stage.summary, stage.duration_s))
        else:
            out.append((name, " ".join(["ddplab", report.command, *report.argv[1:]]), report.verdict, "",
                        getattr(report.results, "duration_s", None)))
    return out


def _unique_ids(figures: list) -> list:
    """Element ids must be unique on a page: a repeated one gets -2, -3... (the first keeps its name)."""
    seen: dict[str, int] = {}
    out = []
    for f in figures:
        seen[f.id] = seen.get(f.id, 0) + 1
        out.append(f if seen[f.id] == 1 else replace(f, id=f"{f.id}-{seen[f.id]}"))
    return out


def _figure_sections(figures: list) -> list[tuple[str, list]]:
    """(heading, the drawn figures) of each section, in order of first appearance; side by side where they fit."""
    from .charts import draw

    sections: dict[str, list] = {}
    for f in figures:
        sections.setdefault(f.section, []).append(draw(f))
    return list(sections.items())
