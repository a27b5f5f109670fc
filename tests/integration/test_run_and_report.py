"""The README's main command end to end (quick profile on CPU), its two report files, the
HTML page in a real headless browser, `ddplab report` and `ddplab compare` on reports."""

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import PLANTED_SECRETS, REDACTED_BY_VALUE, load_json, run_cli

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("lab")
    # run in an environment holding secrets, as users' shells do
    proc = run_cli("run", "--profile", "quick", "--out", str(out / "run"), cwd=out, timeout=300, env=PLANTED_SECRETS,
                   alone=True)  # its env stage judges the whole machine: other tests' orphans are not its own
    return proc, out / "run"


def test_quick_profile_runs_every_stage_and_writes_both_files(quick_run):
    proc, out = quick_run
    doc = load_json(out / "report.json")
    assert {"schema_version", "command", "config", "platform", "results", "verdict"} <= set(doc)
    names = [s["name"] for s in doc["results"]["stages"]]
    assert names == ["env", "train-shared", "storm", "sweep", "ceiling", "contention", "drills", "leftovers"]
    # Every stage passes, but for the storm's verdict, which is the host's speed held to its line (1000 us for gloo on
    # the host; a CI machine shared with another test process crossed it once): held to its numbers, not to a pass.
    storm = next(s for s in doc["results"]["stages"] if s["name"] == "storm")["report"]["results"]
    assert storm["correct"] is True
    assert {s["name"]: s["verdict"] for s in doc["results"]["stages"] if s["verdict"] != "pass"} == \
        ({} if storm["within_threshold"] else {"storm": "fail"}), proc.stdout[-4000:] + proc.stderr[-2000:]
    assert (proc.returncode, doc["verdict"]) == ((0, "pass") if storm["within_threshold"] else (1, "fail"))
    assert not doc["results"]["interrupted"]
    assert (out / "report.html").stat().st_size > 10_000
    # the whole environment is never written, only the whitelist
    text = (out / "report.json").read_text()
    assert '"PATH"' not in text and '"HOME"' not in text


def test_the_labs_drills_name_the_killed_rank_and_leave_nothing(quick_run):
    """The quick profile's drills, kill_rank and kill_launcher (tests/integration/test_drills_cpu.py runs the others
    through `ddplab drill`, the same runner)."""
    _, out = quick_run
    stage = next(s for s in load_json(out / "report.json")["results"]["stages"] if s["name"] == "drills")
    drills = {d["drill"]: d for d in stage["report"]["results"]["drills"]}
    assert list(drills) == ["kill_rank", "kill_launcher"]
    kill = drills["kill_rank"]
    assert kill["verdict"] == "pass" and kill["detected_by"] in ("launcher (a rank ended)", "peer connection lost")
    assert 1 in kill["culprit_ranks"] and kill["leaked_pids"] == [] and kill["error_excerpt"]
    assert kill["detect_s"] <= stage["report"]["config"]["timeout_s"] + 5
    launcher = drills["kill_launcher"]
    assert launcher["verdict"] == "pass" and launcher["detected_by"].startswith("parent-death guard")
    assert launcher["leaked_pids"] == []


def test_secrets_in_the_environment_stay_out_of_both_report_files(quick_run):
    _, out = quick_run
    json_text, html_text = (out / "report.json").read_text(), (out / "report.html").read_text()
    for value in PLANTED_SECRETS.values():
        assert value not in json_text and value not in html_text
    environ = load_json(out / "report.json")["platform"]["environ"]
    assert not {"RANKING_API_KEY", "DDPLAB_WEBHOOK_TOKEN", "GLOO_TOKEN"} & set(environ)
    assert {k: environ[k] for k in REDACTED_BY_VALUE} == {k: "[redacted]" for k in REDACTED_BY_VALUE}


def test_report_rerenders_from_json_alone(quick_run, tmp_path):
    _, out = quick_run
    copy = tmp_path / "elsewhere.json"
    copy.write_text((out / "report.json").read_text())
    proc = run_cli("report", str(copy))
    assert proc.returncode == 0
    assert (tmp_path / "elsewhere.html").read_text().count("class='check-row'") == \
        len(load_json(copy)["results"]["checks"])


def test_compare_passes_identical_reports_and_flags_a_planted_regression(quick_run, tmp_path):
    _, out = quick_run
    doc = load_json(out / "report.json")
    same = run_cli("compare", str(out / "report.json"), str(out / "report.json"))
    assert same.returncode == 0, same.stdout + same.stderr
    slower = json.loads(json.dumps(doc))
    for stage in slower["results"]["stages"]:
        if stage["name"] == "storm":
            stage["report"]["results"]["mean_us"] *= 1.5  # planted: the storm got 50% slower
    path = tmp_path / "slower.json"
    path.write_text(json.dumps(slower))
    proc = run_cli("compare", str(out / "report.json"), str(path), "--tolerance", "5%")
    assert proc.returncode == 1
    assert "storm" in proc.stdout and "<- slower" in proc.stdout


@pytest.mark.skipif(not CHROMIUM and not os.environ.get("CI"), reason="chromium not installed (CI installs it)")
def test_html_report_in_a_real_browser(quick_run, tmp_path):
    from playwright.sync_api import sync_playwright

    _, out = quick_run
    checks = load_json(out / "report.json")["results"]["checks"]
    errors = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: (errors.append(f"dialog: {d.message}"), d.dismiss()))
        page.goto((out / "report.html").as_uri())
        assert page.locator("#verdict-table tr.check-row").count() == len(checks)
        assert page.locator("#overall-verdict").inner_text() == "PASS"
        assert page.locator("svg[id^='storm-hist'] rect.bar").count() > 0
        assert page.locator("svg[id^='busbw'] polyline.series").count() > 0
        assert page.locator("#memory-over-time polyline.series").count() == 2  # one line per rank
        assert page.locator("#drill-timeline").count() == 1
        shot = Path(os.environ.get("DDPLAB_SCREENSHOT", tmp_path / "report.png"))
        page.screenshot(path=str(shot), full_page=True)
        browser.close()
    assert errors == []
    assert shot.stat().st_size > 10_000
