"""report.html as an engineer's instrument (issue 21), without a browser: the answer first, charts whose axes
can be read, a baseline beside the run, a hung job's collectives per rank and its trace-event file, and no
placeholder text. tests/integration/test_report_in_browser.py checks the same pages in Chromium."""

import json
import re
import shutil
from pathlib import Path

import pytest

from ddplab.report import charts as cs
from ddplab.reading.comparison import load_baseline
from ddplab.report.page import render_html, write_page
from ddplab.reading.catalog import parse_report, read_report
from ddplab.report.summary import INFO, shown_verdict
from tests.conftest import run_cli
from tests.report_pages import HANG, NCCL_TESTS, QUICK, failing_lab_doc, page_text, placeholders

DOCS = Path(__file__).resolve().parents[2] / "docs" / "results"


def _read(doc: dict):
    return parse_report(json.dumps(doc).encode(), "crafted.json")


def _ids(page: str, cls: str) -> list[str]:
    return re.findall(rf"<svg id='([^']+)' class='chart {cls}'", page)


# ------------------------------------------------------------------------------------------- the first screen

def test_a_failure_leads_the_page_with_its_next_step():
    page = render_html(_read(failing_lab_doc()))
    attention = page.index("id='attention'")
    assert attention < page.index("id='key-figures'") < page.index("id='verdict-table'") < page.index("<svg")
    findings = re.findall(r"<div class='finding (\w+)'>.*?<b>([^<]+)</b> &rsaquo; <b>([^<]+)</b>.*?"
                          r"<b>Next step:</b> ([^<]+)</div>", page)
    assert [(v, stage, check) for v, stage, check, _ in findings] == [
        ("fail", "contention", "stage ran"), ("fail", "leftovers", "nothing left running")]
    assert all(step.strip() for *_, step in findings)
    assert "id='overall-verdict'>FAIL<" in page and "2 failed" in page


def test_a_passing_lab_says_so_and_collapses_every_check():
    page = render_html(read_report(str(QUICK)))
    assert "No check failed or warned." in page
    assert page.count("<details class='stage'>") == 9  # 8 stages of checks and the stage table, all closed
    assert " open>" not in page


def test_rows_that_judged_nothing_get_no_green_chip():
    report = read_report(str(QUICK))
    rows = {c.check: shown_verdict(c) for c in report.results.checks}
    assert rows["step time"] == INFO  # threshold "informational": nothing was held against it
    assert rows["mean all_reduce latency"] == "pass"
    page = render_html(report)
    assert "<span class='badge info'>INFO</span>" in page and "8 informational" in page and "1 skipped" in page


def test_key_figures_are_the_numbers_an_engineer_looks_for_first():
    page = render_html(read_report(str(DOCS / "2xh200-final-round" / "round_b" / "full.json")))
    tiles = dict(re.findall(r"<div class='label'>([^<]+)</div><div class='value'>([^<]+)</div>", page))
    assert tiles["all_reduce latency, 4 B"] == "62.3 us"
    assert tiles["peak bus bandwidth"] == "369 GB/s"
    assert tiles["what torch adds per call"] == "+29.4 us"
    assert tiles["slowest fault detection"] == "10.2 s"
    assert tiles["processes left running"] == "0"
    assert tiles["shared device: busbw / copy ceiling"] == "0.11 %"  # gloo on one GPU, against its copy rate


# ------------------------------------------------------------------------------------------- axes and charts

@pytest.mark.parametrize("lo, hi, log, unit", [(8, 2 ** 30, True, cs.BYTES), (8, 64, True, cs.BYTES),
                                               (4, 4, True, cs.BYTES), (150, 400, True, cs.PLAIN),
                                               (12, 14, True, cs.MICROSECONDS), (0, 0.9, False, cs.GBPS),
                                               (294e6, 310e6, False, cs.MIB), (0, 0, False, cs.COUNT),
                                               (0.003, 5.5, False, cs.SECONDS)])
def test_every_axis_gets_at_least_three_ticks_inside_its_range(lo, hi, log, unit):
    a, b = cs.domain([lo, hi], log, include_zero=not log, unit=unit)
    ticks = cs.log_ticks(a, b, unit) if log else cs.linear_ticks(a, b)
    assert len(ticks) >= 3 and all(a * 0.999 <= t <= b * 1.001 + 1e-12 for t in ticks)
    assert a <= lo and hi <= b


def test_tick_labels_read_in_their_unit():
    assert [cs.size_label(2.0 ** e) for e in (3, 10, 26, 30)] == ["8 B", "1 KiB", "64 MiB", "1 GiB"]
    assert cs.tick_labels([0, 0.25, 0.5, 0.75, 1.0, 1.25], cs.SECONDS, log=False) == \
        ["0 s", "0.25 s", "0.5 s", "0.75 s", "1 s", "1.25 s"]  # one unit along a linear axis
    assert cs.tick_labels([10, 100, 1000], cs.MICROSECONDS, log=True) == ["10 us", "100 us", "1 ms"]
    assert [cs.number_label(v) for v in (1830.37, 0.56, 12345, 0.00012)] == ["1830", "0.56", "12.3k", "0.00012"]


def test_every_chart_of_a_full_report_has_three_labelled_ticks_per_numeric_axis():
    page = render_html(read_report(str(DOCS / "2xh200-final-round" / "round_b" / "full.json")))
    charts = re.findall(r"<svg id='([^']+)' class='chart (\w+)'.*?</svg>", page, re.S)
    bodies = re.findall(r"<svg id='[^']+' class='chart (\w+)'(.*?)</svg>", page, re.S)
    assert len(charts) >= 20
    for kind, body in bodies:
        assert body.count("class='tick-x'") >= 3 or kind == "bars"
        if kind in ("xy", "bars"):
            assert body.count("class='tick-y'") >= 3
    assert "time-sweep-all_reduce" in page and "busbw-sweep-all_reduce" in page  # per op: time and busbw
    assert "storm-hist-storm" in page and page.count("class='mark stat'") >= 2  # p50 and p99 of each storm


def test_a_spike_is_ringed_on_both_plots_of_its_collective():
    doc = json.loads(QUICK.read_text())
    sweep = next(s for s in doc["results"]["stages"] if s["name"] == "sweep")["report"]["results"]
    row = next(r for r in sweep["rows"] if r.get("time_us"))
    sweep["spikes"] = [{"op": row["op"], "size_bytes": row["size_bytes"], "in_place": row["in_place"],
                        "time_us": row["time_us"], "neighbours": [], "factor": 4.5}]
    page = render_html(_read(doc))
    assert page.count("class='highlight'") == 2 and "spike: 4.5x its neighbours" in page


# ------------------------------------------------------------------------------------------- baseline

def test_a_baseline_is_drawn_dashed_beside_the_collective_it_measured(tmp_path):
    report = read_report(str(QUICK))
    page = render_html(report, baseline=load_baseline(str(NCCL_TESTS)))
    assert "id='baseline-note'" in page and "dashed grey lines on 2 chart(s)" in page
    assert page.count("class='series baseline'") == 4  # nccl-tests' out- and in-place, on time and busbw
    assert "class='series baseline'" not in render_html(report)


def test_ddplab_report_takes_a_baseline_and_compare_writes_a_page(tmp_path):
    out = tmp_path / "page.html"
    proc = run_cli("report", str(QUICK), "--out", str(out), "--baseline", str(NCCL_TESTS), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "class='series baseline'" in out.read_text()
    proc = run_cli("report", str(QUICK), "--out", str(out), "--baseline", str(tmp_path / "missing.txt"), cwd=tmp_path)
    assert proc.returncode == 2 and "missing.txt is not a file" in proc.stdout + proc.stderr
    slower = json.loads(QUICK.read_text())
    sweep = next(s for s in slower["results"]["stages"] if s["name"] == "sweep")["report"]["results"]
    for row in sweep["rows"]:
        row["time_us"] *= 3 if row["size_bytes"] >= 2 ** 17 else 1  # B slower at its two largest sizes
    (tmp_path / "b.json").write_text(json.dumps(slower))
    compared = tmp_path / "compare.html"
    proc = run_cli("compare", str(QUICK), str(tmp_path / "b.json"), "--html", str(compared), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    page = compared.read_text()
    assert "compare-time-all_reduce" in page and "class='series baseline'" in page  # A dashed beside B
    # ringed on time and busbw: the 2 slower rows, and the 8 KiB row, a spike in both runs (not counted as slower)
    assert page.count("slower: +200.0 %") == 4 and page.count("class='highlight'") == 6
    assert re.search(r"<b>compare</b> &rsaquo; <b>no row slower</b>: 2 of \d+ rows slower", page)


# ------------------------------------------------------------------------------------------- a hung job

@pytest.fixture
def moved_hang(tmp_path) -> Path:
    """The hang fixture copied elsewhere: its report names /tmp/h6/y/... files that are not there."""
    shutil.copytree(HANG.parent, tmp_path / "job")
    return tmp_path / "job" / "report.json"


def test_the_hang_is_drawn_per_rank_with_the_culprit_named(moved_hang):
    report = read_report(str(moved_hang))
    assert not Path(report.results.ranks[0].flight_record).exists()  # resolved beside the report instead
    page = render_html(report, base_dir=moved_hang.parent, trace_name="report.trace.json")
    headline = re.search(r"<p class='headline' id='hang-timeline-headline'>([^<]+)</p>", page).group(1)
    assert headline.startswith("Culprit: rank 1.") and "all_reduce #4" in headline
    assert page.index("id='hang-timeline'") < page.index("id='launch-ranks'")
    assert re.findall(r"class='span culprit-last'.*?<title>([^:]+):", page) == ["all_reduce #3"]
    assert re.findall(r"class='span stuck'.*?<title>([^:]+):", page) == ["all_reduce #4"]  # rank 0 waits there
    assert "waiting in all_reduce #4" in page and "href='report.trace.json'" in page


def test_the_trace_file_is_chrome_trace_events_beside_the_page(moved_hang):
    written = write_page(read_report(str(moved_hang)), moved_hang.with_suffix(".html"))
    trace_file = moved_hang.with_name("report.trace.json")
    assert written == [moved_hang.with_suffix(".html"), trace_file]
    trace = json.loads(trace_file.read_text())
    events = trace["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert {(e["pid"], e["name"]) for e in spans} == {(0, f"all_reduce #{i}") for i in (1, 2, 3, 4)} | \
        {(1, f"all_reduce #{i}") for i in (1, 2, 3)}
    for e in spans:
        assert isinstance(e["ts"], float) and e["ts"] >= 0 and e["dur"] >= 0 and isinstance(e["tid"], int)
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"rank 0", "rank 1 (culprit)"}
    assert {e["name"] for e in events if e["ph"] == "i"} >= {"hang declared", "last progress"}
    stuck = next(e for e in spans if e["args"]["highlight"] == "stuck")
    assert stuck["pid"] == 0 and stuck["args"]["end"] == "still pending when the record was dumped"
    assert trace["otherData"]["culprit_ranks"] == [1]


def _page_and_trace(report_file: Path) -> tuple[str, dict]:
    written = write_page(read_report(str(report_file)), report_file.with_suffix(".html"))
    return written[0].read_text(), json.loads(written[1].read_text())


def _spans_of(trace: dict, rank: int) -> dict[str, dict]:
    return {e["name"]: e["args"] for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] == rank}


def _edit_record(report_file: Path, rank: int, edit) -> None:
    path = report_file.parent / "ranks" / str(rank) / "flight.json"
    record = json.loads(path.read_text())
    edit(record)
    path.write_text(json.dumps(record))


def test_a_collective_its_group_never_completed_is_drawn_waiting_whatever_else_the_entry_says(moved_hang):
    """gloo's entries stay "scheduled": completion is what the rank's record says of its group. An entry retired
    (as a recorder that retires on issue marks it) past the group's last completed collective is still waited in."""
    _edit_record(moved_hang, 0, lambda r: r["entries"][-1].update(retired=True))  # #4; pg_status: completed 3
    page, trace = _page_and_trace(moved_hang)
    assert re.findall(r"class='span stuck'.*?<title>([^:]+):", page) == ["all_reduce #4"]
    assert "waiting in all_reduce #4" in page
    stuck = _spans_of(trace, 0)["all_reduce #4"]
    assert (stuck["state"], stuck["completed"], stuck["highlight"]) == ("scheduled", False, "stuck")
    assert _spans_of(trace, 0)["all_reduce #3"]["completed"] is True


def test_the_collective_a_rank_waited_in_at_the_hang_is_drawn_waiting_though_its_later_record_completes_it(
        moved_hang):
    """A rank that answered late (let go after the hang was declared) dumped a record in which the collective it
    had waited in completed: its status at the declaration is what the page draws, up to the declaration."""
    doc = json.loads(moved_hang.read_text())
    hang = doc["results"]["hang"]
    hang["snapshot"] = {"0": {"rank": 0, "pid": 1, "phase": "running",
                              "progress": {"0": {"enqueued": 4, "started": -1, "completed": 3}}}}
    moved_hang.write_text(json.dumps(doc))

    def ran_on(record):
        record["pg_status"]["0"]["last_completed_collective"] = "4"
        record["entries"][-1]["retired"] = True
        record["dumped_at"] = hang["declared_at"] + 3

    _edit_record(moved_hang, 0, ran_on)
    page, trace = _page_and_trace(moved_hang)
    assert re.findall(r"class='span stuck'.*?<title>([^:]+):", page) == ["all_reduce #4"]
    waited = next(e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] == 0 and e["name"] == "all_reduce #4")
    assert (waited["args"]["completed"], waited["args"]["highlight"]) == (False, "stuck")
    assert waited["args"]["end"].startswith("waiting when the hang was declared")
    declared_us = (hang["declared_at"] * 1e9 - trace["otherData"]["origin_unix_ns"]) / 1e3
    assert abs(waited["ts"] + waited["dur"] - declared_us) < 1


def test_a_report_without_readable_flight_records_has_no_timeline_and_no_trace(tmp_path):
    shutil.copy(HANG, tmp_path / "report.json")  # the records left behind
    written = write_page(read_report(str(tmp_path / "report.json")), tmp_path / "report.html")
    assert written == [tmp_path / "report.html"] and "hang-timeline" not in written[0].read_text()


# ------------------------------------------------------------------------------------------- placeholders

PAGES = [QUICK, HANG, *sorted((DOCS / "2xh200-final-round" / "launch-x2").glob("*_report.json")),
         DOCS / "1xh200-foundation" / "run_1xh200.json", DOCS / "2xh200-final-round" / "round_b" / "full.json"]


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_no_placeholder_reaches_the_page(path):
    page = render_html(read_report(str(path)), base_dir=path.parent)
    assert placeholders(page_text(page)) == []


def test_a_rank_without_a_flight_record_keeps_its_lane_and_says_why(moved_hang):
    doc = json.loads(moved_hang.read_text())
    doc["results"]["ranks"][1]["flight_record"] = None  # the culprit exited before it could dump
    moved_hang.write_text(json.dumps(doc))
    page = render_html(read_report(str(moved_hang)), base_dir=moved_hang.parent)
    lanes = re.findall(r"class='tick-cat lane'[^>]*>([^<]+)</text><text class='lane-note'[^>]*>([^<]+)<", page)
    assert lanes == [("rank 0", "waiting in all_reduce #4 for 5.4 s"),
                     ("rank 1 (culprit)", "no flight record (the rank ended: SIGTERM)")]
    assert "class='span culprit-last'" not in page and page.count("class='span stuck'") == 1


def test_the_launcher_s_moments_are_marked_only_where_the_series_says_when_it_started():
    from types import SimpleNamespace

    from ddplab.report.flight_timeline import moments

    hang = SimpleNamespace(last_progress_at=1000.5, declared_at=1005.5)
    unanchored = SimpleNamespace(timeseries=SimpleNamespace(), hang=hang, detected_at=1005.5)
    assert moments(unanchored) == []  # reports today: seconds since an unknown start
    anchored = SimpleNamespace(timeseries=SimpleNamespace(started_at=1000.0), hang=hang, detected_at=1005.5)
    assert [(m.label, m.x, m.kind) for m in moments(anchored)] == [("last progress", 0.5, "event"),
                                                                   ("hang declared", 5.5, "detected")]


def test_records_that_hold_no_entries_draw_no_timeline(moved_hang):
    # A job stuck before its first collective: every rank dumped a record, none with an entry.
    for flight in moved_hang.parent.rglob("*flight*.json"):
        doc = json.loads(flight.read_text())
        doc["entries"] = []
        flight.write_text(json.dumps(doc))
    page = render_html(read_report(str(moved_hang)), base_dir=moved_hang.parent)
    assert "hang-timeline" not in page and "launch-ranks" in page
    written = write_page(read_report(str(moved_hang)), moved_hang.with_suffix(".html"))
    assert written == [moved_hang.with_suffix(".html")]  # no trace file without an entry to put in it
