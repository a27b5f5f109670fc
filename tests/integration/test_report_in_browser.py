"""Crafted report.json documents opened in headless Chromium: no dialog fires and the
payloads show as text.

Two pages: one from `ddplab report` (payloads in every field the renderer reads that the
schema lets through: the strings), and one from the renderer alone with payloads in every
field it can format at all, numbers included (escaping must not lean on validation).
"""

import json
import os
import shutil

import pytest

from ddplab.errors import UsageError
from ddplab.html_report import render_html
from ddplab.report_schema import check_document
from tests.conftest import run_cli
from tests.crafted_reports import PAYLOADS, fields_the_renderer_reads, load_fixture, with_value

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not CHROMIUM and not os.environ.get("CI"),
                                                    reason="chromium not installed (CI installs it)")]


def crafted(monkeypatch, accepts) -> tuple[dict, int]:
    """The fixture with a payload (the next one in turn) in every read field where
    ``accepts(document)`` holds; returns the document and how many fields carry one."""
    doc = load_fixture()
    carrying = 0
    for i, places in enumerate(fields_the_renderer_reads(doc, monkeypatch).values()):
        candidate = with_value(doc, places, PAYLOADS[i % len(PAYLOADS)])
        if accepts(candidate):
            doc, carrying = candidate, carrying + 1
    return doc, carrying


def _schema_accepts(doc) -> bool:
    try:
        check_document(doc, "crafted")
        return True
    except UsageError:
        return False  # a number or a flag, refused as such (tests/unit/test_html_report.py)


def _renderer_copes(doc) -> bool:
    try:
        render_html(doc)
        return True
    except (TypeError, ValueError, KeyError):
        return False  # e.g. a format spec ({:.1f}) that a string cannot take


def test_crafted_reports_fire_no_dialog_in_chromium(tmp_path, monkeypatch):
    from playwright.sync_api import sync_playwright

    strings, n_strings = crafted(monkeypatch, _schema_accepts)
    anything, n_anything = crafted(monkeypatch, _renderer_copes)
    assert n_strings >= 25 and n_anything > n_strings  # numbers (duration_s, rank, ...) carry payloads too
    (tmp_path / "strings.json").write_text(json.dumps(strings))
    proc = run_cli("report", str(tmp_path / "strings.json"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (tmp_path / "anything.html").write_text(render_html(anything))

    dialogs, errors = [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"])
        page = browser.new_page()
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.on("pageerror", lambda e: errors.append(str(e)))
        seen = {}
        for name, doc in (("strings", strings), ("anything", anything)):
            page.goto((tmp_path / f"{name}.html").as_uri())
            page.wait_for_load_state("load")
            page.wait_for_timeout(500)  # an <img onerror> fires after its load fails
            seen[name] = (page.locator("#verdict-table").inner_text(), page.locator("script").count(),
                          json.loads(page.locator("#report-data").text_content()) == doc)
        browser.close()
    assert dialogs == [] and errors == []
    for shown, scripts, data_intact in seen.values():
        assert scripts == 1 and data_intact  # the JSON data block only, holding the document unchanged
        assert any(p in shown for p in PAYLOADS)  # the payloads are text on the page
