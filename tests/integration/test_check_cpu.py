"""`ddplab check` for real on the CPU, twice: a healthy node (OK in every output, within its deadline, a
baseline written), and a node degraded by injection (a leftover process, a slow row, a wrong row: CRITICAL,
with each fault's message, and the leftover gone afterwards). Each runs in a PID namespace of its own where
the machine allows (run_cli(alone=True)): the check judges the whole machine, and other tests make orphans."""

import xml.etree.ElementTree as ET

import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import load_json, loose_thresholds, run_cli
from tests.unit.test_check_formats import parse_nagios

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def healthy(tmp_path_factory):
    d = tmp_path_factory.mktemp("check-ok")
    proc = run_cli("check", "--out", str(d / "out"), "--format", "nagios", "--textfile-dir", str(d / "textfile"),
                   "--junit", str(d / "junit.xml"), "--write-baseline", str(d / "baseline.json"),
                   "--thresholds", loose_thresholds(d), "--deadline", "240", cwd=d, alone=True, timeout=300)
    return proc, d


@pytest.fixture(scope="module")
def degraded(tmp_path_factory):
    d = tmp_path_factory.mktemp("check-bad")
    proc = run_cli("check", "--out", str(d / "out"), "--format", "npd", "--textfile-dir", str(d / "textfile"),
                   "--junit", str(d / "junit.xml"), "--inject", "leftover", "--inject", "slow:all_gather",
                   "--inject", "wrong:all_reduce", "--deadline", "240", cwd=d, alone=True, timeout=300)
    return proc, d


def test_a_healthy_node_is_ok_in_every_output(healthy):
    proc, d = healthy
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    status, text, perf = parse_nagios(proc.stdout)
    assert status == "OK" and text.endswith("checks passed"), proc.stdout
    # the run's time, as the JSON has it, against the deadline it ran under (how long a check takes is
    # scripts/bench's to measure: on a machine shared with other tests it took 101 s, on an idle one 15-25 s)
    duration = perf["duration"]
    assert (float(duration["max"]), duration["uom"]) == (240.0, "s")
    assert 0 < float(duration["value"]) <= 240.0
    assert {"busbw.all_reduce.in.524288_GBps", "busbw.all_to_all.out.524288_GBps", "latency.mean"} <= set(perf)
    doc = load_json(d / "out" / "report.json")
    assert float(duration["value"]) == pytest.approx(doc["results"]["duration_s"], abs=0.05)
    assert doc["command"] == "check" and doc["verdict"] == "pass" and doc["results"]["injected"] == []
    assert [s["name"] for s in doc["results"]["stages"]] == ["env", "storm", "sweep", "ceiling", "drill", "leftovers"]
    ops = {r["op"] for r in doc["results"]["metrics"]["busbw"]}
    assert ops == {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}
    assert doc["results"]["metrics"]["wrong_elements"] == 0 and doc["results"]["metrics"]["leftover_processes"] == 0
    assert (d / "out" / "report.html").stat().st_size > 10_000
    families = {f.name: f for f in text_string_to_metric_families((d / "textfile" / "ddplab_check.prom").read_text())}
    assert families["ddplab_check_overall_status"].samples[0].value == 0
    assert len(families["ddplab_busbw_bytes_per_second"].samples) == len(doc["results"]["metrics"]["busbw"])
    suite = ET.parse(d / "junit.xml").getroot().find("testsuite")
    assert suite.get("failures") == "0" and suite.get("errors") == "0"
    assert load_json(d / "baseline.json")["results"]["metrics"] == doc["results"]["metrics"]


def test_each_stage_command_line_is_recorded(healthy):
    _, d = healthy
    plans = {s["name"]: s for s in load_json(d / "out" / "report.json")["config"]["stages"]}
    assert "all_reduce,all_gather,reduce_scatter,all_to_all" in plans["sweep"]["argv"]
    assert plans["drill"]["argv"][0] == "kill_rank"


def test_a_degraded_node_is_critical_with_each_faults_message(degraded):
    proc, d = degraded
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    line = proc.stdout
    doc = load_json(d / "out" / "report.json")
    rows = {c["key"]: c for c in doc["results"]["node_checks"]}
    critical = {k for k, c in rows.items() if c["status"] == "critical"}
    assert line.count("\n") == 1 and line.startswith(f"CRITICAL: {len(critical)} critical, ")
    # the two injected faults; besides them only the storm's latency may be critical: on the host it is the host's
    # speed (a loaded CI machine crossed gloo's 1000 us line), not a fault of this test's
    assert critical - {"storm.mean_all_reduce_latency"} == {"env.orphaned_processes",
                                                            "sweep.collective_results_correct"}, critical
    assert "env orphaned processes: 1" in line and "sweep collective results correct: #wrong" in line
    assert "[injected faults: leftover: pid " in line
    assert rows["env.orphaned_processes"]["status"] == "critical"
    assert rows["sweep.collective_results_correct"]["status"] == "critical"
    slow = [c for k, c in rows.items() if k.startswith("busbw.all_gather.") and k.endswith(".524288")]
    assert slow and all(c["status"] == "warning" for c in slow), slow
    assert rows["leftovers.nothing_left_running"]["status"] == "ok", "the injected rank is not one of the check's"
    families = {f.name: f for f in text_string_to_metric_families((d / "textfile" / "ddplab_check.prom").read_text())}
    statuses = {s.labels["check"]: s.value for s in families["ddplab_check_status"].samples}
    assert statuses["env.orphaned_processes"] == 2 and statuses[slow[0]["key"]] == 1
    assert families["ddplab_leftover_processes"].samples[0].value == 1
    failures = [f.get("message") for f in ET.parse(d / "junit.xml").getroot().iter("failure")]
    assert any("orphaned processes: 1" in m for m in failures) and any("#wrong" in m for m in failures)
    pid = int(doc["results"]["injected"][0].split("pid ")[1].split(",")[0])
    orphan = doc["results"]["stages"][0]["report"]["results"]["orphans"]
    assert [o["pid"] for o in orphan] == [pid] and orphan[0]["run_id"].startswith("check-injected-")


def test_the_injected_leftover_is_gone_after_the_check(degraded):
    proc, d = degraded
    run_id = load_json(d / "out" / "report.json")["results"]["stages"][0]["report"]["results"]["orphans"][0]["run_id"]
    left = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("DDPLAB_RUN_ID") == run_id and p.status() != psutil.STATUS_ZOMBIE:
                left.append(p.pid)
        except (psutil.Error, OSError):
            continue
    assert left == []
