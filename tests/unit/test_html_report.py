"""The HTML report on crafted documents: a payload in any field the renderer reads is either
refused (naming the field) or shown as text; never markup, never script."""

import ast
import json
from pathlib import Path

import pytest

from ddplab import html_report
from ddplab.errors import UsageError
from ddplab.report_schema import check_document
from tests.crafted_reports import PAYLOADS, assert_inert, dotted, fields_the_renderer_reads, load_fixture, \
    names_field, with_value

SOURCE = Path(html_report.__file__)


@pytest.fixture(scope="module")
def fixture_doc():
    return load_fixture()


@pytest.fixture(scope="module")
def read_fields(fixture_doc):
    with pytest.MonkeyPatch.context() as mp:
        return fields_the_renderer_reads(fixture_doc, mp)


def test_the_fixture_renders_every_section(fixture_doc, read_fields):
    page = html_report.render_html(fixture_doc)
    assert_inert(page, fixture_doc)
    for marker in ("id='verdict-table'", "storm-hist-storm", "busbw-sweep", "memory-over-time", "drill-timeline"):
        assert marker in page
    assert len(read_fields) >= 40  # the walk found the fields (a broken walk would test nothing)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_payload_in_any_field_is_refused_or_inert(fixture_doc, read_fields, payload):
    shown = []
    for field, places in read_fields.items():
        crafted = with_value(fixture_doc, places, payload)
        try:
            check_document(crafted, "crafted.json")
        except UsageError as err:  # refused before rendering: the message names the field
            assert err.exit_code == 2
            assert names_field(err.message, field), (dotted(field), err.message)
            continue
        page = html_report.render_html(crafted)
        assert_inert(page, crafted)
        shown.append(dotted(field))
    # the strings reach the page (as text), including the ones issue 10 saw injected
    assert "results.checks[*].value" in shown and "results.stages[*].summary" in shown
    assert "results.stages[*].report.results.drills[*].verdict" in shown
    assert "verdict" in shown and "platform.hostname" in shown


@pytest.mark.parametrize("field, value", [
    (("results", "duration_s"), "<img src=x onerror=alert(1)>"),
    (("results", "stages", 2, "report", "results", "per_op_histogram", "edges_us", 0), "<script>alert(1)</script>"),
    (("results", "stages", 1, "report", "results", "timeseries", "samples", 0, "ranks", 0, "rank"), "<b>0</b>"),
])
def test_numbers_the_issue_injected_through_are_refused_as_numbers(fixture_doc, field, value):
    crafted = with_value(fixture_doc, [field], value)
    with pytest.raises(UsageError) as err:
        check_document(crafted, "crafted.json")
    assert names_field(err.value.message, field) and "number" in err.value.message


def test_the_renderer_alone_escapes_what_validation_would_have_refused(fixture_doc):
    """Escaping does not lean on validation: a number field holding markup is still text."""
    crafted = with_value(fixture_doc, [("results", "duration_s")], "<img src=x onerror=alert(1)>")
    assert_inert(html_report.render_html(crafted), crafted)


@pytest.mark.parametrize("text", ["</script><script>alert(1)</script>", "<!--<script>", "a\u2028b\u2029c",
                                  "</SCRIPT >", "&lt;/script&gt;"])
def test_the_json_data_block_cannot_end_early(fixture_doc, text):
    crafted = with_value(fixture_doc, [("results", "checks", 0, "value")], text)
    block = html_report.json_for_script(crafted)
    assert "<" not in block and ">" not in block and "\u2028" not in block and "\u2029" not in block
    assert json.loads(block) == crafted
    assert_inert(html_report.render_html(crafted), crafted)


def test_markup_is_built_only_from_this_module_s_own_templates():
    """Structural: every h() template is a string literal, and Markup() wraps only the CSS
    constant and the escaped JSON block, so no document value can become markup."""
    tree = ast.parse(SOURCE.read_text())
    helpers = [f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name in ("h", "concat")]
    assert len(helpers) == 2
    inside_helpers = {id(n) for f in helpers for n in ast.walk(f)}
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and id(n) not in inside_helpers]
    templates = [c for c in calls if c.func.id == "h"]
    assert templates and all(isinstance(c.args[0], ast.Constant) and isinstance(c.args[0].value, str)
                             for c in templates)
    wrapped = sorted(ast.unparse(c.args[0]) for c in calls if c.func.id == "Markup")
    assert wrapped == ["CSS", "json_for_script(doc)"]
