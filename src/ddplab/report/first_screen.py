"""The first screen of report.html, drawn from summary.Summary: the verdict with the count of checks,
the findings (FAIL, then WARN) each with its next step, the key figures as large numbers; and every check by
stage in collapsed sections (a stage with a finding starts open). Markup only through markup.py's ``h()``.
"""

from __future__ import annotations

from collections import Counter

from .markup import Markup, badge, concat, h
from .summary import ShownCheck, Summary


def first_screen(report, summary: Summary, machine: str, meta: str, interrupted: bool) -> Markup:
    verdict = str(summary.verdict)
    head = h("<h1>ddplab {} <span class='badge verdict-big {}' id='overall-verdict'>{}</span>"
             "<span class='counts' id='check-counts'>{}</span></h1><div class='meta'>{}<br>{}{}</div>",
             report.command, verdict, verdict.upper(), summary.counts_in_words(), machine, meta,
             h(" &mdash; <b>INTERRUPTED: partial report</b>") if interrupted else "")
    return concat([head, _findings(summary.attention), _key_figures(summary)], lines=True)


def _findings(rows: list[ShownCheck]) -> Markup:
    if not rows:
        return h("<p class='all-clear' id='attention'>No check failed or warned.</p>")
    return h("<div class='attention' id='attention'>{}</div>", concat(_finding(s) for s in rows))


def _finding(s: ShownCheck) -> Markup:
    c = s.check
    return h("<div class='finding {cls}'>{chip} <b>{stage}</b> &rsaquo; <b>{check}</b>: {value}"
             "<div class='what'>expected: {threshold}. {meaning}</div>"
             "<div class='next'><b>Next step:</b> {next}</div></div>", cls=s.shown, chip=badge(s.shown),
             stage=c.stage, check=c.check, value=c.value, threshold=c.threshold, meaning=c.meaning,
             next=c.next_step)


def _key_figures(summary: Summary) -> Markup:
    if not summary.figures:
        return h("")
    tiles = [h("<div class='tile {}'><div class='label'>{}</div><div class='value'>{}</div>"
               "<div class='detail'>{}</div></div>", f.tone, f.label, f.value, f.detail) for f in summary.figures]
    return h("<div class='figures-row' id='key-figures'>{}</div>", concat(tiles))


def stage_groups(summary: Summary) -> Markup:
    """One collapsed section per stage: its worst chip and counts in the summary line, its rows inside."""
    out = []
    for g in summary.groups:
        words = ", ".join(f"{n} {k.upper()}" for k, n in Counter(s.shown for s in g.checks).items())
        rows = concat(h("<tr class='check-row'><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
                        "</tr>", s.check.check, badge(s.shown), s.check.value, s.check.threshold, s.check.meaning,
                        s.check.next_step) for s in g.checks)
        out.append(h("<details class='stage'{open}><summary>{chip} <b>{stage}</b> &mdash; {words}</summary>"
                     "<table><thead><tr><th>check</th><th>verdict</th><th>number</th><th>threshold</th>"
                     "<th>what it means</th><th>next step</th></tr></thead><tbody>{rows}</tbody></table></details>",
                     open=h(" open") if g.shown in ("fail", "warn") else "", chip=badge(g.shown),
                     stage=g.stage or "(report)", words=words, rows=rows))
    return concat(out)
