"""The HTML report on crafted documents: a payload in any field of a report is either refused when the report
is read back (naming the field) or shown as text; never markup, never script."""

import ast
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from markupsafe import escape

from ddplab.report import charts, page as html_report
from ddplab.errors import UsageError
from tests.crafted_reports import PAYLOADS, assert_inert, dotted, leaves, load_fixture, names_field, read_back, \
    with_value

TEMPLATES = Path(html_report.__file__).parent / "templates"


@pytest.fixture(scope="module")
def fixture_doc():
    return load_fixture()


def test_the_fixture_renders_every_section(fixture_doc):
    report = read_back(fixture_doc)
    page = html_report.render_html(report)
    assert_inert(page, report.to_json())
    for marker in ("id='verdict-table'", "storm-hist-storm", "busbw-sweep", "memory-over-time", "drill-timeline"):
        assert marker in page
    assert len(leaves(fixture_doc)) >= 200  # the walk found the fields (a broken walk would test nothing)


@pytest.fixture(scope="module")
def accepted_fields(fixture_doc) -> list:
    """Every field alone holding all five payloads in one string, a different one first field after field (a
    field shown cut to its first characters still shows each payload first somewhere): refused before rendering
    with a message naming the field, or rendered inert. A refused field that takes a plain word is refusing the
    payloads' characters, not strings: it is tried with each payload alone, and one it takes is rendered, inert.
    Returns the fields that took the five at once."""
    accepted = []
    for i, (field, places) in enumerate(leaves(fixture_doc).items()):
        turn = i % len(PAYLOADS)
        joined = " ".join(PAYLOADS[turn:] + PAYLOADS[:turn])
        try:
            report = read_back(with_value(fixture_doc, places, joined))
        except UsageError as err:
            assert err.exit_code == 2
            assert _names(err.message, field, joined), (dotted(field), err.message)
            try:
                read_back(with_value(fixture_doc, places, "word"))
            except UsageError:
                continue  # a number, or one of a few names: no string passes, payload or not
            for payload in PAYLOADS:
                try:
                    alone = read_back(with_value(fixture_doc, places, payload))
                except UsageError:
                    continue
                assert_inert(html_report.render_html(alone), alone.to_json())
            continue
        assert_inert(html_report.render_html(report), report.to_json())
        accepted.append(field)
    return accepted


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_payload_in_any_field_is_refused_or_inert(fixture_doc, accepted_fields, payload):
    # The fixture rendered each field alone with every payload in it; here each payload is in every field that
    # takes strings at once, where one field's value can change how another is drawn. (One page per field and
    # payload made 1,900 pages, 97 s of the suite on 2 cores.)
    fields = leaves(fixture_doc)
    report = read_back(with_value(fixture_doc, [p for f in accepted_fields for p in fields[f]], payload))
    page = html_report.render_html(report)
    assert_inert(page, report.to_json())
    assert escape(payload) in page  # the payload reached the page, as text
    # the strings reach the page, including the ones issue 10 saw injected
    shown = {dotted(f) for f in accepted_fields}
    assert {"results.checks[*].value", "results.stages[*].summary", "platform.hostname"} <= shown


def _names(message: str, field, value: str) -> bool:
    """The field itself, or the Config holding it with the refused value quoted (a Config refuses its values
    as a whole: "field ...config must be a valid SweepConfig (unknown collective "<value>"...)")."""
    return names_field(message, field) or any(names_field(message, field[:i]) and value in message
                                              for i in range(len(field) - 1, 0, -1) if field[i - 1] == "config")


@pytest.mark.parametrize("field, value", [
    (("results", "duration_s"), "<img src=x onerror=alert(1)>"),
    (("results", "stages", 2, "report", "results", "per_op_histogram", "edges_us", 0), "<script>alert(1)</script>"),
    (("results", "stages", 1, "report", "results", "timeseries", "samples", 0, "ranks", 0, "rank"), "<b>0</b>"),
    (("verdict",), "<script>alert(1)</script>"),
    (("results", "stages", 6, "report", "results", "drills", 0, "verdict"), "<svg onload=alert(1)>"),
])
def test_fields_the_issue_injected_through_are_refused_for_their_type(fixture_doc, field, value):
    with pytest.raises(UsageError) as err:
        read_back(with_value(fixture_doc, [field], value))
    assert names_field(err.value.message, field), err.value.message


def test_the_renderer_alone_escapes_what_reading_would_have_refused(fixture_doc):
    """Escaping does not lean on validation: typed fields holding markup are still text on the page."""
    report = read_back(fixture_doc)
    run = report.results
    stages = [replace(s, summary=PAYLOADS[i % len(PAYLOADS)], name=PAYLOADS[1]) for i, s in enumerate(run.stages)]
    crafted = replace(report, verdict=report.verdict, results=replace(run, stages=stages, out=PAYLOADS[0]))
    page = html_report.render_html(crafted)
    assert_inert(page, crafted.to_json())
    assert escape(PAYLOADS[1]) in page  # the stage names reached the page, as text


@pytest.mark.parametrize("text", ["</script><script>alert(1)</script>", "<!--<script>", "a\u2028b\u2029c",
                                  "</SCRIPT >", "&lt;/script&gt;"])
def test_the_json_data_block_cannot_end_early(fixture_doc, text):
    crafted = with_value(fixture_doc, [("results", "checks", 0, "value")], text)
    block = html_report.environment().from_string("{{ doc|tojson }}").render(doc=crafted)  # as page.html writes it
    assert "<" not in block and ">" not in block and "\u2028" not in block and "\u2029" not in block
    assert json.loads(block) == crafted
    report = read_back(crafted)
    assert_inert(html_report.render_html(report), report.to_json())


def test_autoescape_is_the_one_place_a_value_becomes_html():
    """Structural: the page's templates are rendered with autoescape on, and none of them marks a value safe or turns
    autoescape off; the page module builds no markup of its own (the charts come drawn as Markup, below)."""
    assert html_report.environment().autoescape is True
    templates = sorted(TEMPLATES.glob("*.html"))
    assert {t.name for t in templates} >= {"page.html", "first_screen.html", "checks.html", "macros.html"}
    for template in templates:
        text = template.read_text()
        assert not re.search(r"\|\s*safe\b|autoescape\s+false|\bMarkup\b|\|\s*forceescape", text), template.name
    tree = ast.parse(Path(html_report.__file__).read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in ("Markup", "escape")]


def test_the_charts_build_markup_only_from_their_own_literal_templates():
    """The SVG is drawn in Python (charts.py) with one helper, h(): MarkupSafe's Markup.format, which escapes every
    value; every h() template is a string literal, and Markup() appears nowhere else in the module."""
    tree = ast.parse(Path(charts.__file__).read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    templates = [c for c in calls if c.func.id == "h"]
    assert templates and all(isinstance(c.args[0], ast.Constant) and isinstance(c.args[0].value, str)
                             for c in templates)
    wrapped = sorted(ast.unparse(c.args[0]) for c in calls if c.func.id == "Markup")
    assert wrapped == ["''", "template"]  # concat's separator, and h()'s own literal
    assert charts.h("<text>{}</text>", "<b>") == "<text>&lt;b&gt;</text>"
