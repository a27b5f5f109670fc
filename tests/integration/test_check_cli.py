"""`ddplab check` on the command line, in every format: the exit code for pass, warn, fail, cannot run and bad
usage, and what goes to stdout. Judged from the quick lab report in tests/fixtures (--from-report: nothing runs)
with faults put in through the hidden --inject, so these take a second; tests/integration/test_check_cpu.py runs
the real check."""

import json
import xml.etree.ElementTree as ET

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ddplab.cli import main
from tests.crafted_reports import FIXTURE
from tests.unit.test_check_formats import parse_nagios

FORMATS = ("text", "json", "nagios", "npd")
# (inject, status word, what the message must say)
NODES = {
    "pass": ((), "OK", "22 checks passed"),
    "warn": (("slow:all_reduce",), "WARNING", "all_reduce busbw 512K B in-place"),
    "fail": (("wrong:all_reduce",), "CRITICAL", "collective results correct: #wrong 131072"),
}
EXIT = {"pass": {"text": 0, "json": 0, "nagios": 0, "npd": 0},
        "warn": {"text": 0, "json": 0, "nagios": 1, "npd": 0},
        "fail": {"text": 1, "json": 1, "nagios": 2, "npd": 1},
        "cannot run": {"text": 3, "json": 3, "nagios": 3, "npd": 2},
        "bad usage": {"text": 2, "json": 2, "nagios": 3, "npd": 2}}


def _run(argv, capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("node", sorted(NODES))
def test_exit_code_and_stdout_for_a_judged_node(node, fmt, capsys, tmp_path):
    inject, word, message = NODES[node]
    argv = ["check", "--from-report", str(FIXTURE), "--format", fmt, "--textfile-dir", str(tmp_path),
            "--junit", str(tmp_path / "junit.xml"), *(a for spec in inject for a in ("--inject", spec))]
    code, out, err = _run(argv, capsys)
    assert code == EXIT[node][fmt], out + err
    if fmt == "nagios":
        status, text, perf = parse_nagios(out)
        assert status == word and message in text and "duration" in perf
    elif fmt == "npd":
        assert out.count("\n") == 1 and out.startswith(f"{word}: ") and message in out
    elif fmt == "json":
        doc = json.loads(out)
        assert {"schema_version", "command", "config", "platform", "results", "verdict"} <= set(doc)
        assert {"status", "summary", "machine", "expectations", "node_checks", "metrics", "finished_unix", "stages",
                "duration_s", "injected"} <= set(doc["results"])
        assert doc["command"] == "check" and doc["results"]["status"] == word.lower()
        assert message in doc["results"]["summary"] and doc["results"]["injected"] == list(inject)
    else:
        assert f"status: {word} - " in out and message in out
    families = {f.name: f for f in text_string_to_metric_families((tmp_path / "ddplab_check.prom").read_text())}
    assert families["ddplab_check_overall_status"].samples[0].value == {"OK": 0, "WARNING": 1, "CRITICAL": 2}[word]
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert int(suite.get("failures")) == (1 if word == "CRITICAL" else 0)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_machine_that_cannot_run_the_check_is_unknown(fmt, capsys, tmp_path):
    """No such device here: the environment cannot be read, nothing else runs, the node is UNKNOWN."""
    code, out, err = _run(["check", "--device", "cuda", "--out", str(tmp_path / "out"), "--format", fmt,
                           "--textfile-dir", str(tmp_path), "--junit", str(tmp_path / "junit.xml")], capsys)
    assert code == EXIT["cannot run"][fmt], out + err
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [s["name"] for s in doc["results"]["stages"]] == ["env", "leftovers"], "nothing ran after env"
    assert doc["results"]["status"] == "unknown" and doc["verdict"] == "skip"
    if fmt == "nagios":
        assert parse_nagios(out)[0] == "UNKNOWN" and 'device "cuda" is not available' in out
    if fmt == "npd":
        assert out.startswith("UNKNOWN: ")
    families = {f.name: f for f in text_string_to_metric_families((tmp_path / "ddplab_check.prom").read_text())}
    assert families["ddplab_check_overall_status"].samples[0].value == 3
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite.get("failures") == "0" and int(suite.get("errors")) >= 1


USAGE = [
    (["--format", "xml"], 'unknown format "xml"'),
    (["--tolerance", "five"], '--tolerance "five" is not a percentage'),
    (["--tolerance", "5%", "--critical-tolerance", "1%"], "is below --tolerance 5%"),
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["--nproc", "1"], "--nproc 1 is out of range"),
    (["--inject", "slow:broadcast"], '--inject "slow:broadcast"'),
    (["--from-report", "/nonexistent.json"], "/nonexistent.json is not a file"),
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("argv, message", USAGE, ids=[u[1] for u in USAGE])
def test_bad_usage_is_2_or_the_runners_unknown(argv, message, fmt, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    full = ["check", *argv] if argv[:2] == ["--format", "xml"] else ["check", "--format", fmt, *argv]
    code, out, err = _run(full, capsys)
    expected_fmt = "text" if argv[:2] == ["--format", "xml"] else fmt
    assert code == EXIT["bad usage"][expected_fmt], out + err
    assert message in err, err
    if expected_fmt == "nagios":
        status, text, _ = parse_nagios(out)
        assert status == "UNKNOWN" and message in text
    elif expected_fmt == "npd":
        assert out.startswith("UNKNOWN: ") and message in out and out.count("\n") == 1
    else:
        assert out == ""
    assert not (tmp_path / "ddplab-runs").exists(), "nothing started"


def test_a_bad_thresholds_file_is_exit_2_naming_the_file_and_the_key(capsys, tmp_path):
    bad = tmp_path / "fleet.toml"
    bad.write_text("[[machine]]\ndevice = 'NVIDIA H200'\n[[machine.busbw]]\nop = 'allreduce'\nwarning = 300\n")
    code, out, err = _run(["check", "--from-report", str(FIXTURE), "--thresholds", str(bad)], capsys)
    assert code == 2 and "error: invalid-thresholds" in err
    assert f"{bad}: machine[0].busbw[0].op is 'allreduce'" in err and "valid: all_reduce, all_gather" in err
    code, out, err = _run(["check", "--from-report", str(FIXTURE), "--thresholds", str(bad), "--format", "nagios"],
                          capsys)
    assert code == 3 and out.startswith("DDPLAB UNKNOWN - invalid-thresholds: ") and str(bad) in out


def test_write_baseline_then_hold_a_slower_node_to_it(capsys, tmp_path):
    good = tmp_path / "good.json"
    code, _, err = _run(["check", "--from-report", str(FIXTURE), "--write-baseline", str(good)], capsys)
    assert code == 0, err
    doc = json.loads(good.read_text())
    assert doc["command"] == "check" and doc["results"]["metrics"]["busbw"]
    code, out, _ = _run(["check", "--from-report", str(FIXTURE), "--baseline", str(good), "--tolerance", "5%",
                         "--format", "nagios"], capsys)
    assert code == 0 and parse_nagios(out)[0] == "OK"
    code, out, _ = _run(["check", "--from-report", str(FIXTURE), "--baseline", str(good), "--tolerance", "5%",
                         "--critical-tolerance", "50%", "--inject", "slow:all_reduce", "--format", "nagios"], capsys)
    status, text, perf = parse_nagios(out)
    assert code == 2 and status == "CRITICAL" and "all_reduce busbw 512K B in-place" in text
    assert perf["baseline.busbw.all_reduce.in.524288_GBps"]["warn"].endswith(":")
    # a check report judged again gives the same numbers (the baseline itself, as --from-report)
    code, out, _ = _run(["check", "--from-report", str(good), "--format", "json"], capsys)
    assert code == 0 and json.loads(out)["results"]["metrics"] == doc["results"]["metrics"]


def test_a_check_report_is_drawn_again_by_ddplab_report(capsys, tmp_path):
    path = tmp_path / "check.json"
    code, _, _ = _run(["check", "--from-report", str(FIXTURE), "--inject", "wrong:all_reduce", "--json", str(path)],
                      capsys)
    assert code == 1
    code, _, err = _run(["report", str(path)], capsys)
    assert code == 0, err
    page = (tmp_path / "check.html").read_text()
    assert page.count("class='check-row'") == len(json.loads(path.read_text())["results"]["node_checks"])
    assert "collective results correct" in page and "FAIL" in page


@pytest.mark.parametrize("fmt, code", [("text", 70), ("nagios", 3), ("npd", 2)])
def test_a_bug_is_70_or_the_runners_unknown_with_one_line(fmt, code, capsys, monkeypatch, tmp_path):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the traceback goes, for this test

    def broken(*args, **kwargs):
        raise RuntimeError("judge bug")

    monkeypatch.setattr("ddplab.check.runner.judge", broken)
    got, out, err = _run(["check", "--from-report", str(FIXTURE), "--format", fmt], capsys)
    assert got == code and "internal-error: ddplab check broke (RuntimeError: judge bug" in err
    if fmt == "nagios":
        assert parse_nagios(out)[0] == "UNKNOWN" and "judge bug" in out
    elif fmt == "npd":
        assert out.startswith("UNKNOWN: internal-error: ddplab check broke") and out.count("\n") == 1


@pytest.mark.parametrize("fmt", ["text", "nagios"])
def test_a_check_that_cannot_run_replaces_an_older_ok_textfile_and_writes_the_junit(fmt, capsys, tmp_path):
    """A bad --thresholds file: exit 2 (or the runner's UNKNOWN), and what the collectors read says UNKNOWN and
    why, never the earlier run's OK."""
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    (textfile / "ddplab_check.prom").write_text("# TYPE ddplab_check_overall_status gauge\n"
                                                "ddplab_check_overall_status 0.0\n")
    missing = tmp_path / "fleet.toml"
    code, out, err = _run(["check", "--from-report", str(FIXTURE), "--thresholds", str(missing), "--format", fmt,
                           "--textfile-dir", str(textfile), "--junit", str(tmp_path / "junit.xml")], capsys)
    assert code == {"text": 2, "nagios": 3}[fmt], out + err
    families = {f.name: f for f in text_string_to_metric_families((textfile / "ddplab_check.prom").read_text())}
    assert families["ddplab_check_overall_status"].samples[0].value == 3
    assert [(s.labels["check"], s.value) for s in families["ddplab_check_status"].samples] == [("check.ran", 3)]
    assert [p.name for p in textfile.iterdir()] == ["ddplab_check.prom"], "replaced whole: no temporary file left"
    (error,) = ET.parse(tmp_path / "junit.xml").getroot().iter("error")
    assert error.get("type") == "UNKNOWN" and str(missing) in error.get("message")


def test_a_judged_report_keeps_its_own_time_in_the_textfile(capsys, tmp_path):
    """--from-report: the last-run timestamp is the report's (a staleness alert must see an old report as old)."""
    import datetime

    code, _, _ = _run(["check", "--from-report", str(FIXTURE), "--textfile-dir", str(tmp_path / "a"),
                       "--write-baseline", str(tmp_path / "check.json")], capsys)
    assert code == 0
    created = datetime.datetime.fromisoformat(json.loads(FIXTURE.read_text())["created_utc"]).timestamp()

    def stamp(directory):
        text = (tmp_path / directory / "ddplab_check.prom").read_text()
        return {f.name: f for f in text_string_to_metric_families(text)}[
            "ddplab_check_last_run_timestamp_seconds"].samples[0].value

    assert stamp("a") == created
    code, _, _ = _run(["check", "--from-report", str(tmp_path / "check.json"), "--textfile-dir", str(tmp_path / "b")],
                      capsys)
    assert code == 0 and stamp("b") == created, "a check's report judged again keeps the time it was judged for"
