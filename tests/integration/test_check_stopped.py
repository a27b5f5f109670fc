"""`ddplab check` stopped for real: SIGTERM while its storm's ranks run, and its own --deadline. Each is UNKNOWN in
every output and says why and what was not run; the textfile and the JUnit of an earlier OK run are replaced; the
stop ends the ranks and leaves nothing running. One run of each: it writes the runner's line, the textfile and the
JUnit, and the formats it was not asked for are made from its report, the same record every output comes from.
Each runs in a PID namespace of its own where the machine allows (conftest.PID_NAMESPACE): the check judges the
whole machine, and other tests make orphans."""

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ddplab.reading.catalog import read_report
from ddplab.check import formats
from ddplab.check.formats import npd
from ddplab.cli import main
from tests.conftest import PID_NAMESPACE, _pid_namespaces_work, load_json, loose_thresholds
from tests.stopped_runs import processes_under, settle, spawned_ranks, wait_for
from tests.runner_validators import junit_problems, promtool_problems
from tests.unit.test_check_formats import parse_nagios

pytestmark = pytest.mark.slow
DEADLINE_S = 9  # past the storm on the idle machine (env ends about 5 s after the start): the stop meets ranks
OK_TEXTFILE = "# HELP ddplab_check_overall_status x\n# TYPE ddplab_check_overall_status gauge\n" \
              "ddplab_check_overall_status 0.0\n"


def start_check(d, *args) -> subprocess.Popen:
    (d / "textfile").mkdir()
    (d / "textfile" / "ddplab_check.prom").write_text(OK_TEXTFILE)  # an earlier run's OK, to be replaced
    prefix = PID_NAMESPACE if _pid_namespaces_work() else []
    env = dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="200")
    return subprocess.Popen([*prefix, sys.executable, "-m", "ddplab", "check", "--out", str(d / "out"),
                             "--textfile-dir", str(d / "textfile"), "--junit", str(d / "junit.xml"),
                             "--thresholds", loose_thresholds(d), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=d, env=env)


def ddplab_process(proc) -> psutil.Process:
    """The check's own process: ``proc`` itself, or the child unshare forked into the namespace."""
    if not _pid_namespaces_work():
        return psutil.Process(proc.pid)
    return wait_for(lambda: psutil.Process(proc.pid).children(), proc)[0]


@pytest.fixture(scope="module")
def sigtermed(tmp_path_factory):
    d = tmp_path_factory.mktemp("check-sigterm")
    proc = start_check(d, "--format", "nagios", "--deadline", "300")
    check = ddplab_process(proc)
    wait_for(lambda: (d / "out" / "storm").is_dir() and len(spawned_ranks(check)) == 2, proc, timeout=240)
    ranks = spawned_ranks(check)
    check.send_signal(signal.SIGTERM)
    stopped_at = time.monotonic()
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err, d, time.monotonic() - stopped_at, ranks


def test_a_sigtermed_check_is_nagios_unknown_saying_what_was_not_run(sigtermed):
    code, out, err, d, took, _ = sigtermed
    assert code == 3, out + err[-3000:]
    status, text, perf = parse_nagios(out)
    assert status == "UNKNOWN" and "check completed: stopped by SIGTERM after " in text, out
    assert "storm cut short; not run: sweep, ceiling, drill" in text
    assert "CRITICAL" not in out, "a stop condemns nothing"
    assert took < 30, f"{took:.1f} s from SIGTERM to the exit"
    results = load_json(d / "out" / "report.json")["results"]
    assert results["status"] == "unknown" and results["stopped_by"] == "SIGTERM"
    assert results["not_run"] == ["sweep", "ceiling", "drill"] and float(perf["duration"]["max"]) == 300


def test_the_textfile_and_the_junit_of_the_stopped_check_say_unknown(sigtermed):
    _, _, _, d, _, _ = sigtermed
    text = (d / "textfile" / "ddplab_check.prom").read_text()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["ddplab_check_overall_status"].samples[0].value == 3, "the earlier OK is gone"
    statuses = {s.labels["check"]: s.value for s in families["ddplab_check_status"].samples}
    assert statuses["check.completed"] == 3 and 2 not in statuses.values()
    assert promtool_problems(text) == []
    root = ET.parse(d / "junit.xml").getroot()
    assert junit_problems(root) == []
    suite = root.find("testsuite")
    assert suite.get("failures") == "0" and int(suite.get("errors")) >= 2  # the stop, and the storm it cut
    assert any("stopped by SIGTERM" in e.get("message") for e in root.iter("error"))


def test_the_other_formats_of_the_same_record_are_unknown(sigtermed, capsys):
    _, _, _, d, _, _ = sigtermed
    record = read_report(str(d / "out" / "report.json")).results
    assert npd.render(record).startswith("UNKNOWN: ") and formats.exit_code(record.status, "npd") == 2
    # judged again, nothing stops this command: ddplab's own UNKNOWN (3), not 130
    assert main(["check", "--from-report", str(d / "out" / "report.json"), "--format", "json"]) == 3
    assert json.loads(capsys.readouterr().out)["results"]["stopped_by"] == "SIGTERM"


def test_the_stop_ended_the_ranks_and_left_nothing_running(sigtermed):
    _, _, _, d, _, ranks = sigtermed
    assert ranks and settle(lambda: [r.pid for r in ranks if r.is_running()
                                     and r.status() != psutil.STATUS_ZOMBIE]) == []
    assert settle(lambda: processes_under(d)) == []


def test_the_deadline_ends_the_check_in_time_as_unknown_with_nothing_left(tmp_path):
    started = time.monotonic()
    proc = start_check(tmp_path, "--format", "npd", "--deadline", str(DEADLINE_S))
    out, err = proc.communicate(timeout=180)
    took = time.monotonic() - started
    assert proc.returncode == 2, out + err[-3000:]  # node-problem-detector's Unknown
    assert out.startswith("UNKNOWN: ") and f"stopped by its {DEADLINE_S} s deadline after " in out, out
    assert took < DEADLINE_S + 10, f"{took:.1f} s: a runner's limit 10 s after the deadline would have killed it"
    results = load_json(tmp_path / "out" / "report.json")["results"]
    assert results["stopped_by"] == "deadline" and "drill" in results["not_run"]
    text = (tmp_path / "textfile" / "ddplab_check.prom").read_text()
    assert "ddplab_check_overall_status 3.0" in text
    assert settle(lambda: processes_under(tmp_path)) == []
