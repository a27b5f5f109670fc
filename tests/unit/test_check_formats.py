"""`ddplab check`'s outputs, each parsed by its reference parser, on records built in memory (check_records.py):
a healthy node, a sweep row made slow (WARNING), a row made wrong and a leftover process (CRITICAL), a stage that
could not run (UNKNOWN). Every format must carry the status and the message of the check that set it."""

import re
import xml.etree.ElementTree as ET

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ddplab.check import formats
from ddplab.check.formats import junit, nagios, npd, prometheus
from ddplab.check.record import Status
from tests.unit.check_records import judged, stages_of, with_orphan, with_stage_skipped

# The Nagios plugin guidelines' output: "SERVICE STATUS: text | perfdata", perfdata entries
# 'label'=value[UOM];[warn];[crit];[min];[max] with warn and crit in the range format [@][start:][end].
NUM = r"-?[0-9]+(?:\.[0-9]+)?"
RANGE = rf"@?(?:~|{NUM})?:?(?:{NUM})?"
PERF = re.compile(rf"'(?P<label>[^'=]+)'=(?P<value>{NUM})(?P<uom>us|ms|s|%|B|KB|MB|TB|c)?;(?P<warn>{RANGE});"
                  rf"(?P<crit>{RANGE});(?P<min>{NUM})?;(?P<max>{NUM})?")
LINE = re.compile(r"^DDPLAB (?P<status>OK|WARNING|CRITICAL|UNKNOWN) - (?P<text>[^|\n]+?)(?: \| (?P<perf>.*))?$")


def parse_nagios(output: str) -> tuple[str, str, dict[str, dict]]:
    first = output.splitlines()[0]
    m = LINE.match(first)
    assert m, f"not a Nagios status line: {first!r}"
    perf, rest = {}, (m["perf"] or "").strip()
    while rest:
        p = PERF.match(rest)
        assert p, f"perfdata does not follow the grammar at: {rest[:80]!r}"
        perf[p["label"]] = p.groupdict()
        rest = rest[p.end():].lstrip()
    return m["status"], m["text"], perf


CASES = {
    "healthy": (lambda: judged(), Status.OK, "22 checks passed"),
    "slow row": (lambda: judged("slow:all_reduce"), Status.WARNING, "all_reduce busbw 512K B in-place"),
    "wrong row": (lambda: judged("wrong:all_reduce"), Status.CRITICAL, "collective results correct: #wrong 131072"),
    "leftover": (lambda: judged(stages=with_orphan(stages_of())), Status.CRITICAL, "orphaned processes: 1"),
    "cannot run": (lambda: judged(stages=with_stage_skipped(stages_of(), "drills")), Status.UNKNOWN,
                   'drills stage ran: device "cuda" is not available'),
}
EXPECTED_EXIT = {  # format -> status -> exit code (formats.EXIT_CODES, as documented)
    "text": {Status.OK: 0, Status.WARNING: 0, Status.CRITICAL: 1, Status.UNKNOWN: 3},
    "json": {Status.OK: 0, Status.WARNING: 0, Status.CRITICAL: 1, Status.UNKNOWN: 3},
    "nagios": {Status.OK: 0, Status.WARNING: 1, Status.CRITICAL: 2, Status.UNKNOWN: 3},
    "npd": {Status.OK: 0, Status.WARNING: 0, Status.CRITICAL: 1, Status.UNKNOWN: 3},
}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    make, status, message = CASES[request.param]
    return make(), status, message


def test_each_case_has_the_status_and_the_message_of_the_check_that_set_it(case):
    record, status, message = case
    assert record.status is status
    assert message in record.summary
    for fmt, codes in EXPECTED_EXIT.items():
        assert formats.exit_code(record.status, fmt) == codes[status]


def test_nagios_line_follows_the_plugin_grammar_with_levels_in_perfdata(case):
    record, status, message = case
    out = nagios.render(record)
    got, text, perf = parse_nagios(out)
    assert got == status.label and message in text
    assert perf["duration"]["value"] == "21.5" and perf["duration"]["uom"] == "s"
    assert perf["latency.mean"]["uom"] == "us" and float(perf["copy_ceiling_GBps"]["value"]) > 0
    assert perf["wrong_elements"]["crit"] == "0" and perf["leftover_processes"]["crit"] == "0"
    busbw = perf["busbw.all_reduce.in.524288_GBps"]
    floor = [c for c in record.node_checks if c.key == "busbw.all_reduce.in.524288"][0].reading.warning
    assert busbw["uom"] is None and busbw["warn"] == f"{nagios.number(floor)}:", "a floor alerts below: 'w:'"
    long_output = out.splitlines()[1:]
    assert len(long_output) == len(record.problems())
    if status is not Status.OK:
        assert long_output[0].startswith(f"{status.label}: ") and message in long_output[0]


def test_npd_message_is_one_line_starting_with_the_status(case):
    record, status, message = case
    out = npd.render(record)
    assert "\n" not in out and out.startswith(f"{status.label}: ") and message in out


def test_prometheus_textfile_parses_with_the_reference_parser(case, tmp_path):
    record, status, _ = case
    path = prometheus.write(record, tmp_path / "textfile")
    assert [p.name for p in path.parent.iterdir()] == ["ddplab_check.prom"], "the temporary file was renamed"
    families = {f.name: f for f in text_string_to_metric_families(path.read_text())}
    assert {f.type for f in families.values()} == {"gauge"}
    statuses = {s.labels["check"]: s.value for s in families["ddplab_check_status"].samples}
    assert statuses == {c.key: c.status.code for c in record.node_checks}
    assert families["ddplab_check_overall_status"].samples[0].value == status.code
    busbw = {(s.labels["op"], s.labels["size_bytes"], s.labels["placement"]): s.value
             for s in families["ddplab_busbw_bytes_per_second"].samples}
    assert busbw[("all_reduce", "524288", "in-place")] == pytest.approx(
        next(r.busbw_gbps for r in record.metrics.busbw if r.size_bytes == 524288) * 1e9)
    quantiles = {s.labels["quantile"]: s.value for s in families["ddplab_latency_seconds"].samples}
    assert set(quantiles) == {"0.5", "0.9", "0.99", "1"} and quantiles["0.5"] <= quantiles["0.99"] <= quantiles["1"]
    assert families["ddplab_latency_mean_seconds"].samples[0].value == pytest.approx(record.metrics.latency.mean_us / 1e6)
    assert families["ddplab_check_last_run_timestamp_seconds"].samples[0].value == record.finished_unix
    assert families["ddplab_check_duration_seconds"].samples[0].value == 21.5
    info = families["ddplab_check_info"].samples[0].labels
    assert (info["device"], info["device_count"], info["library"]) == ("host CPU", "1", "Gloo")
    injected = families.get("ddplab_check_injected_faults")
    assert (injected.samples[0].value if injected else 0) == len(record.injected)


def test_prometheus_names_follow_the_conventions():
    text = prometheus.render(judged())
    names = {f.name for f in text_string_to_metric_families(text)}
    for name in names:
        assert re.fullmatch(r"ddplab_[a-z0-9_]+", name), name
        assert not name.endswith("_total"), "gauges, not counters"
    assert {n for n in names if "bytes" in n or "seconds" in n} == {
        "ddplab_busbw_bytes_per_second", "ddplab_latency_seconds", "ddplab_latency_mean_seconds",
        "ddplab_copy_ceiling_bytes_per_second", "ddplab_check_last_run_timestamp_seconds",
        "ddplab_check_duration_seconds"}


def test_junit_has_the_required_elements_and_one_testcase_per_check(case, tmp_path):
    record, status, message = case
    root = ET.parse(junit.write(record, tmp_path / "junit.xml", hostname="node7")).getroot()
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    for attr in ("name", "tests", "failures", "errors", "skipped", "time", "timestamp"):
        assert suite.get(attr) is not None, attr
    cases = suite.findall("testcase")
    assert len(cases) == int(suite.get("tests")) == len(record.node_checks)
    for c in cases:
        assert c.get("name") and c.get("classname", "").startswith("ddplab.check.") and float(c.get("time")) >= 0
    failures = [f for c in cases for f in c.findall("failure")]
    errors = [e for c in cases for e in c.findall("error")]
    assert len(failures) == int(suite.get("failures")) == sum(c.status is Status.CRITICAL for c in record.node_checks)
    assert len(errors) == int(suite.get("errors")) == sum(c.status is Status.UNKNOWN for c in record.node_checks)
    assert {p.get("name"): p.get("value") for p in suite.find("properties")}["status"] == status.label
    found = {
        Status.CRITICAL: [f.get("message") for f in failures],
        Status.UNKNOWN: [e.get("message") for e in errors],
        Status.WARNING: [c.findtext("system-out") for c in cases if c.findtext("system-out")],
    }.get(status)
    if found is not None:
        assert any(message in m for m in found), found
        if status is Status.WARNING:
            assert not failures and not errors, "a warning does not fail the CI run"


def test_injected_faults_are_said_in_the_status_line():
    record = judged("slow:all_reduce")
    assert "[injected faults: slow:all_reduce]" in nagios.render(record).splitlines()[0]
    assert "[injected faults: slow:all_reduce]" in npd.render(record)


def test_text_for_a_runner_has_no_line_break_and_no_perfdata_separator():
    assert formats.one_line("a | b\nc") == "a / b c"
    _, text, _ = parse_nagios(nagios.unknown("invalid-format: x | y\nz"))
    assert text == "invalid-format: x / y z"
