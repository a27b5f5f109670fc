"""Crafted report.json documents opened in headless Chromium: no dialog fires and the
payloads show as text.

Two pages: one from `ddplab report` (payloads in every field of a real report that the records let
through: the strings), and one from the renderer alone, with payloads in typed fields (check rows,
the output path) that reading a file would have kept as strings too (escaping must not lean on validation).
"""

import json
import os
import shutil

import pytest

from dataclasses import replace

from ddplab.errors import UsageError
from ddplab.report.page import render_html
from tests.conftest import run_cli
from tests.crafted_reports import PAYLOADS, leaves, load_fixture, read_back, with_value

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not CHROMIUM and not os.environ.get("CI"),
                                                    reason="chromium not installed (CI installs it)")]


def crafted_strings() -> tuple[dict, int]:
    """The fixture with a payload (the next one in turn) in every field the records accept it in;
    returns the document and how many fields carry one."""
    doc = load_fixture()
    carrying = 0
    for i, places in enumerate(leaves(doc).values()):
        candidate = with_value(doc, places, PAYLOADS[i % len(PAYLOADS)])
        try:
            read_back(candidate)
        except UsageError:
            continue  # a number, a flag or a choice, refused as such (tests/unit/test_html_report.py)
        doc, carrying = candidate, carrying + 1
    return doc, carrying


def crafted_typed_fields():
    """A report object whose stages' names and summaries, check rows and output path carry payloads, rendered
    directly (the page shows the rows the lab judged: the record's own, crafted here too)."""
    report = read_back(load_fixture())
    run = report.results
    stages = [replace(s, summary=PAYLOADS[i % len(PAYLOADS)], name=PAYLOADS[(i + 1) % len(PAYLOADS)])
              for i, s in enumerate(run.stages)]
    checks = [replace(c, stage=PAYLOADS[i % len(PAYLOADS)], value=PAYLOADS[(i + 1) % len(PAYLOADS)])
              for i, c in enumerate(run.checks)]
    return replace(report, results=replace(run, stages=stages, checks=checks, out=PAYLOADS[2]))


def test_crafted_reports_fire_no_dialog_in_chromium(tmp_path):
    from playwright.sync_api import sync_playwright

    strings, n_strings = crafted_strings()
    assert n_strings >= 25
    (tmp_path / "strings.json").write_text(json.dumps(strings))
    proc = run_cli("report", str(tmp_path / "strings.json"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    typed = crafted_typed_fields()
    (tmp_path / "typed.html").write_text(render_html(typed))
    expected = {"strings": read_back(strings).to_json(), "typed": typed.to_json()}

    dialogs, errors = [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"])
        page = browser.new_page()
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.on("pageerror", lambda e: errors.append(str(e)))
        seen = {}
        for name, doc in expected.items():
            page.goto((tmp_path / f"{name}.html").as_uri())
            page.wait_for_load_state("load")
            page.wait_for_timeout(500)  # an <img onerror> fires after its load fails
            seen[name] = (page.locator("#verdict-table").text_content(), page.locator("script").count(),
                          json.loads(page.locator("#report-data").text_content()) == doc)
        browser.close()
    assert dialogs == [] and errors == []
    for shown, scripts, data_intact in seen.values():
        assert scripts == 1 and data_intact  # the JSON data block only, holding the document unchanged
        assert any(p in shown for p in PAYLOADS)  # the payloads are text on the page


# ------------------------------------------------------------------------------------- issue 21: the pages as read

COUNT_TICKS = """() => [...document.querySelectorAll('svg.chart')].map(svg => ({
    id: svg.id, kind: svg.classList[1],
    x: [...svg.querySelectorAll('text.tick-x')].filter(t => t.textContent.trim()).length,
    y: [...svg.querySelectorAll('text.tick-y')].filter(t => t.textContent.trim()).length}))"""


def test_report_pages_read_as_an_engineer_needs_them_in_chromium(tmp_path):
    from playwright.sync_api import sync_playwright

    from tests.report_pages import HANG, NCCL_TESTS, QUICK, failing_lab_doc, placeholders, write_doc

    shutil.copytree(HANG.parent, tmp_path / "job")
    pages = {"failing": write_doc(failing_lab_doc(), tmp_path / "failing.json"), "quick": QUICK,
             "hang": tmp_path / "job" / "report.json"}
    for name, source in pages.items():
        extra = ["--baseline", str(NCCL_TESTS)] if name == "quick" else []
        proc = run_cli("report", str(source), "--out", str(tmp_path / f"{name}.html"), *extra, cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    trace = json.loads((tmp_path / "hang.trace.json").read_text())  # beside the page it belongs to
    assert {e["ph"] for e in trace["traceEvents"]} <= {"X", "i", "M"} and trace["displayTimeUnit"] == "ms"
    assert all(isinstance(e["ts"], float) and e["dur"] >= 0 for e in trace["traceEvents"] if e["ph"] == "X")

    seen, errors = {}, []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("requestfailed", lambda r: errors.append(r.url))
        for name in pages:
            page.goto((tmp_path / f"{name}.html").as_uri())
            page.wait_for_load_state("load")
            first = page.locator(".finding").first
            finding = first.bounding_box() if first.count() else None
            collapsed = page.evaluate("document.body.innerText")
            page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
            seen[name] = dict(finding=finding, text=collapsed + page.evaluate("document.body.innerText"),
                              charts=page.evaluate(COUNT_TICKS), baseline=page.locator(".series.baseline").count(),
                              headline=page.locator("#hang-timeline-headline").all_inner_texts())
        browser.close()
    assert errors == []
    failing = seen["failing"]["finding"]
    assert failing is not None and failing["y"] + failing["height"] <= 900  # the failure is on the first screen
    assert seen["hang"]["finding"]["y"] + seen["hang"]["finding"]["height"] <= 900
    for name, s in seen.items():
        assert placeholders(s["text"]) == [], name
        assert s["charts"], name
        for chart in s["charts"]:
            assert chart["x"] >= 3 or chart["kind"] == "bars", (name, chart)
            assert chart["y"] >= 3 or chart["kind"] in ("timeline",), (name, chart)
    assert seen["quick"]["baseline"] >= 2 and seen["failing"]["baseline"] == 0
    assert len(seen["hang"]["headline"]) == 1 and seen["hang"]["headline"][0].startswith("Culprit: rank 1.")
    assert "hang-timeline" in {c["id"] for c in seen["hang"]["charts"]}
