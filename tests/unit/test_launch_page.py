"""`ddplab launch`'s report as a page: the ranks, the culprit and its evidence (the RAS answer included), and
each rank's memory and CPU time, drawn by report/page.py from the record's figures, every value escaped; and the
job directory those come from: a run directory like every run's, with the pid files where the sampler reads them."""

import dataclasses
import html
import json
import os
import time
from pathlib import Path

import pytest

from ddplab.errors import UsageError
from ddplab.report.page import render_html
from ddplab.platform import DeviceMonitor
from ddplab.records import Report
from ddplab.records.figures import LineChart, Table
from ddplab.records.launch import Hang, RasAnswer
from ddplab.records.session import RankSample, Sample, Timeseries
from ddplab.basics.rundir import RunDir
from ddplab.supervision.sampler import RankSampler
from ddplab.reading.catalog import report_from_json
from tests.crafted_reports import PAYLOADS, assert_inert, dotted, leaves, names_field, read_back, with_value

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LAUNCH_REPORT = FIXTURES / "launch-report-skipped-collective.json"
EVIL = "<script>alert(1)</script>"


def rank_sample(rank: int, t: float) -> RankSample:
    return RankSample(rank=rank, pid=100 + rank, cpu_user_s=t * (1 + rank), cpu_system_s=0.5,
                      ctx_switches=10, rss_bytes=(200 + 10 * rank) * 2**20)


TIMESERIES = Timeseries(interval_s=0.5, method="psutil", samples=[
    Sample(t_s=t, ranks=[rank_sample(0, t), rank_sample(1, t)]) for t in (0.5, 1.0, 1.5)])
RAS = RasAnswer(service="NCCL RAS", status="answered", why=None, address="localhost:28028",
                library_version="2.29.7", sent=["CLIENT PROTOCOL 2", "VERBOSE STATUS"], format="text",
                answer=f"#0-0 MISMATCH\nRank 1 has launched up to operation 5 {EVIL}\n", seconds=0.4)
HANG = Hang(declared_at=10.0, last_progress_at=5.0, no_progress_s=5.0, hang_timeout_s=5.0, waiting_ranks=[0],
            reason="no progress for 5.0 s while a rank waited",
               dump_request="ab12", answered=[0, 1], signalled_for_stacks=[], terminated=[0, 1], killed=[],
               ras=RAS)

# Where a job listened, as a user's own socket variable leaves it (exposure.Exposure.to_dict()).
LISTEN = {"loopback_only": False, "single_machine": True, "store": "127.0.0.1:41577", "address": "127.0.0.1",
          "port": 41577, "sockets": [{"variable": "GLOO_SOCKET_IFNAME", "value": EVIL, "set_by": "user",
                                      "loopback": False}],
          "why_not": [f"You set GLOO_SOCKET_IFNAME={EVIL}: the ranks' collective sockets listen there, not on "
                      "loopback."],
          "summary": f"NOT loopback only: rendezvous store 127.0.0.1:41577; collectives GLOO_SOCKET_IFNAME={EVIL} "
                     "(yours)", "across_machines": None}


def fixture_report() -> Report:
    return report_from_json(json.loads(LAUNCH_REPORT.read_text()))


def with_evidence(report: Report) -> Report:
    """The fixture's job as if the watcher had declared a hang with --ras, and sampled its ranks."""
    results = dataclasses.replace(report.results, hang=HANG, timeseries=TIMESERIES)
    return dataclasses.replace(report, results=results)


def test_the_ranks_table_has_each_ranks_end_error_and_evidence_files():
    ranks = fixture_report().results.figures("launch")[0]
    assert isinstance(ranks, Table) and ranks.id == "launch-ranks"
    assert ranks.columns == ["rank", "host", "exit", "ended by", "error", "stacks", "flight record"]
    rank0, rank1 = ranks.rows
    assert rank0[:4] == ["0", "vm", "1", "exit 1"]
    assert rank0[4].startswith("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo")
    assert rank0[5:] == ["/tmp/ddplab-job/ranks/0/stacks.txt", "/tmp/ddplab-job/ranks/0/flight.json"]
    assert rank1[0] == "1" and rank1[4] == ""


def test_the_culprit_table_names_the_ranks_the_collective_the_evidence_and_the_ras_answer():
    culprit = with_evidence(fixture_report()).results.figures("launch")[1]
    rows = dict((what, found) for what, found in culprit.rows)
    assert culprit.id == "launch-culprit"
    assert rows["culprit ranks"] == "1 (behind)"
    assert rows["collective"] == "all_reduce #20 in group 0, input sizes [[1024]], dtypes Float"
    assert rows["evidence"].startswith("rank 1: last enqueued #19; finished its script and exited\nrank 0:")
    assert rows["torchrun would blame"] == "rank 0 (the first rank to fail)"
    assert "ranks waiting: 0;" in rows["hang"] and "terminated: 0, 1;" in rows["hang"]
    assert rows["RAS"] == "NCCL RAS: answered at localhost:28028 in 0.4 s"
    assert rows["RAS answer (text)"] == RAS.answer


def test_memory_and_cpu_time_are_drawn_for_every_rank():
    memory, cpu = with_evidence(fixture_report()).results.figures("launch")[2:]
    assert isinstance(memory, LineChart) and (memory.id, memory.y_label) == ("memory-over-time", "host RSS")
    assert [s.label for s in memory.series] == ["rank 0", "rank 1"]
    assert memory.series[1].points == [(t, 210.0 * 2**20) for t in (0.5, 1.0, 1.5)]
    assert cpu.id == "cpu-over-time" and cpu.series[1].points == [(0.5, 1.5), (1.0, 2.5), (1.5, 3.5)]


def test_a_report_from_before_the_sampler_has_no_charts_and_still_a_page():
    report = fixture_report()
    assert [f.id for f in report.results.figures("launch")] == ["launch-ranks", "launch-culprit"]
    page = render_html(report)
    assert "id='launch-ranks'" in page and "memory-over-time" not in page
    assert "vm: python 3.11.7, torch 2.13.0+cpu" in page  # the launcher's host, not a probed device


def test_the_page_shows_everything_escaped():
    report = with_evidence(fixture_report())
    page = render_html(report)
    for marker in ("id='launch-ranks'", "id='launch-culprit'", "id='memory-over-time'", "id='cpu-over-time'",
                   "id='verdict-table'"):
        assert marker in page
    assert page.count("<polyline class='series'") == 4  # two ranks, two charts
    assert EVIL not in page.split("<script type='application/json'")[0]
    assert html.escape(EVIL) in page
    assert "job succeeded" in page and "nothing left running" in page


def test_the_job_directory_is_claimed_like_a_runs(tmp_path):
    job = RunDir.create(str(tmp_path / "job"), "launch", option="--out")
    assert RunDir.existing(job.path).run_id == job.run_id and job.run_id.startswith("launch-")
    with pytest.raises(UsageError) as err:
        RunDir.create(str(tmp_path / "job"), "launch", option="--out")
    assert err.value.reference == "run-dir-in-use" and err.value.exit_code == 2
    assert str(err.value).startswith(f"--out {tmp_path / 'job'} already holds run {job.run_id}")


def test_without_out_the_job_gets_its_own_directory_under_ddplab_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    job = RunDir.create(None, "launch", option="--out")
    assert job.path == tmp_path / "ddplab-runs" / job.run_id and job.run_id.startswith("launch-")


def test_the_sampler_finds_the_ranks_through_the_job_directory(tmp_path):
    job = RunDir.create(str(tmp_path / "job"), "launch", option="--out")
    job.pid_file(3).write_text(f"{os.getpid()}\n")  # what the boot module writes for rank 3
    sample = RankSampler(job, DeviceMonitor(), query_device_while_timing=True).sample_once()
    assert [(r.rank, r.pid) for r in sample.ranks] == [(3, os.getpid())] and sample.ranks[0].rss_bytes > 0


def test_a_long_job_keeps_a_bounded_even_series(tmp_path):
    run = RunDir.create(tmp_path / "run", "t")
    run.pid_file(0).write_text(f"{os.getpid()}\n")
    with RankSampler(run, DeviceMonitor(), interval_s=0.01, query_device_while_timing=True,
                     max_samples=8) as sampler:
        started = time.monotonic()  # at least 0.6 s, and until it halved twice: a loaded machine samples less often
        while time.monotonic() - started < 30 and (time.monotonic() - started < 0.6 or sampler.interval_s < 0.04):
            time.sleep(0.05)
    series = sampler.timeseries()
    assert len(series.samples) <= 8 and series.interval_s >= 0.04  # halved at least twice
    times = [s.t_s for s in series.samples]
    assert times == sorted(times) and times[-1] > 0.3  # still spans the run


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_payload_in_any_field_of_a_launch_report_is_refused_or_inert(payload):
    doc = json.loads(json.dumps(with_evidence(fixture_report()).to_json()))
    doc["results"]["listen"] = LISTEN
    shown = []
    for field, places in leaves(doc).items():
        try:
            report = read_back(with_value(doc, places, payload))
        except UsageError as err:  # refused before rendering, naming the field
            assert err.exit_code == 2 and _names(err.message, field), (dotted(field), err.message)
            continue
        assert_inert(render_html(report), report.to_json())
        shown.append(dotted(field))
    for field in ("results.ranks[*].error.message", "results.ranks[*].stacks", "results.culprit.evidence[*]",
                  "results.hang.ras.answer", "platform.host", "results.listen.summary",
                  "results.listen.sockets[*].value", "results.listen.why_not[*]"):
        assert field in shown


def _names(message: str, field) -> bool:
    """The field, or a part holding it that refuses its values as a whole (a Config: its Target, --run-path)."""
    return any(names_field(message, field[:i]) for i in range(len(field), 0, -1))


def test_where_the_job_listened_is_a_table_of_its_own_read_back_and_escaped():
    report = fixture_report()
    doc = report.to_json()
    doc["results"]["listen"] = LISTEN
    back = report_from_json(json.loads(json.dumps(doc)))
    assert back.to_json()["results"]["listen"] == LISTEN  # read back as written: exposure.to_dict()'s shape
    listen = back.results.figures("launch")[2]
    assert (listen.id, listen.columns) == ("launch-listen", ["what", "where"])
    rows = dict((what, where) for what, where in listen.rows)
    assert rows["listened"] == LISTEN["summary"] and rows["rendezvous store"] == "127.0.0.1:41577"
    assert rows["GLOO_SOCKET_IFNAME"] == f"{EVIL} (set by user)"
    assert rows["why not loopback only"] == LISTEN["why_not"][0]
    page = render_html(back)
    assert "id='launch-listen'" in page
    assert EVIL not in page.split("<script type='application/json'")[0]
    assert html.escape(f"GLOO_SOCKET_IFNAME={EVIL} (yours)") in page
