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
from ddplab.html_report import render_html
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
    """A report object whose check rows and output path carry payloads, rendered directly."""
    report = read_back(load_fixture())
    run = report.results
    checks = [replace(c, value=PAYLOADS[i % len(PAYLOADS)], meaning=PAYLOADS[(i + 1) % len(PAYLOADS)])
              for i, c in enumerate(run.checks)]
    return replace(report, results=replace(run, checks=checks, out=PAYLOADS[2]))


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
            seen[name] = (page.locator("#verdict-table").inner_text(), page.locator("script").count(),
                          json.loads(page.locator("#report-data").text_content()) == doc)
        browser.close()
    assert dialogs == [] and errors == []
    for shown, scripts, data_intact in seen.values():
        assert scripts == 1 and data_intact  # the JSON data block only, holding the document unchanged
        assert any(p in shown for p in PAYLOADS)  # the payloads are text on the page
