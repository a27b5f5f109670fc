"""`ddplab check`'s outputs, each parsed by its reference parser, on records built in memory (check_records.py):
a healthy node, a sweep row made slow (WARNING), a row made wrong and a leftover process (CRITICAL), a stage that
could not run (UNKNOWN), a check stopped by a signal or its deadline (UNKNOWN). Every format must carry the status
and the message of the check that set it, and pass its runner's own validator (tests/runner_validators.py)."""

import re
import shutil
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ddplab.check import formats
from ddplab.check.formats import junit, nagios, npd, prometheus
from ddplab.check.judge import Stop, not_judged
from ddplab.check.record import Status
from ddplab.records import Verdict
from ddplab.records.run import StageRecord
from tests.runner_validators import junit_problems, lint, promtool_problems
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
    "stopped": (lambda: judged(stages=stopped_in(stages_of(), "contention"), stop=Stop("SIGTERM", ("drills",))),
                Status.UNKNOWN, "check completed: stopped by SIGTERM after 21.5 s; contention cut short; not run: "
                                "drills"),
    "deadline": (lambda: judged(stages=stopped_in(stages_of(), "drills"), stop=Stop("deadline")), Status.UNKNOWN,
                 "stopped by its 50 s deadline after 21.5 s; drills cut short"),
}


def stopped_in(stages: list[StageRecord], name: str) -> list[StageRecord]:
    """The stages as a stop leaves them: ``name`` cut short (its ranks stopped: a failed run of it), the stages
    after it not run, the leftover check after that."""
    names = [s.name for s in stages]
    cut = StageRecord(name, "ddplab " + name, Verdict.FAIL, "interrupted by the user", 1.0, error="interrupted")
    return [*stages[:names.index(name)], cut, stages[names.index("leftovers")]]
EXPECTED_EXIT = {  # format -> status -> exit code (formats.EXIT_CODES, as documented)
    "text": {Status.OK: 0, Status.WARNING: 0, Status.CRITICAL: 1, Status.UNKNOWN: 3},
    "json": {Status.OK: 0, Status.WARNING: 0, Status.CRITICAL: 1, Status.UNKNOWN: 3},
    "nagios": {Status.OK: 0, Status.WARNING: 1, Status.CRITICAL: 2, Status.UNKNOWN: 3},
    "npd": {Status.OK: 0, Status.WARNING: 0, Status.CRITICAL: 1, Status.UNKNOWN: 2},
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
    assert perf["duration"]["max"] == "50", "the duration's max is the deadline it ran under"
    storm = record.stages[[st.name for st in record.stages].index("storm")].report.results
    assert perf["latency.mean"]["crit"] == nagios.number(storm.threshold_us), "the storm's own line: CRITICAL above"
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
    stats = {s.labels["stat"]: s.value for s in families["ddplab_latency_seconds"].samples}
    assert set(stats) == {"p50", "p90", "p99", "max"} and stats["p50"] <= stats["p99"] <= stats["max"]
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


@pytest.mark.parametrize("name", ["stopped", "deadline"])
def test_a_stopped_check_is_unknown_in_every_format_and_says_why_first(name, tmp_path):
    record, _, message = CASES[name][0](), None, CASES[name][2]
    assert record.status is Status.UNKNOWN and record.interrupted
    assert record.problems()[0].key == "check.completed", "why it is unknown comes first"
    status, text, _ = parse_nagios(nagios.render(record))
    assert (status, formats.exit_code(record.status, "nagios")) == ("UNKNOWN", 3) and message in text
    assert re.match(r"UNKNOWN: 2 unknown of \d+ checks: check completed: stopped by ", npd.render(record))
    assert formats.exit_code(record.status, "npd") == 2, "node-problem-detector's Unknown"
    families = {f.name: f for f in text_string_to_metric_families(prometheus.render(record))}
    assert families["ddplab_check_overall_status"].samples[0].value == 3
    suite = ET.fromstring(junit.render(record)).find("testsuite")
    assert suite.get("failures") == "0" and int(suite.get("errors")) == 2, "a stop is an error, not a failure"
    cut = [c for c in record.node_checks if c.stage in ("contention", "drills") and c.status is not Status.OK]
    assert cut and all(c.status is Status.UNKNOWN and c.rule.startswith("the stop cut ") for c in cut)


def test_a_fault_a_finished_stage_found_before_the_stop_stays_critical():
    record = judged("wrong:all_reduce", stages=stopped_in(stages_of(), "contention"), stop=Stop("SIGINT", ("drills",)))
    assert record.status is Status.CRITICAL and record.interrupted
    assert [c.status for c in record.problems()][:2] == [Status.CRITICAL, Status.UNKNOWN]
    assert "check completed: stopped by SIGINT" in record.summary


def test_a_check_that_could_not_run_is_unknown_with_its_reason():
    record = not_judged("invalid-thresholds: /etc/fleet.toml is not a file", "fix the command line")
    assert record.status is Status.UNKNOWN and [c.key for c in record.node_checks] == ["check.ran"]
    assert npd.render(record) == "UNKNOWN: 1 unknown of 1 checks: check ran: invalid-thresholds: /etc/fleet.toml " \
                                 "is not a file (expected the check runs)"
    families = {f.name: f for f in text_string_to_metric_families(prometheus.render(record))}
    assert families["ddplab_check_overall_status"].samples[0].value == 3
    assert junit_problems(ET.fromstring(junit.render(record))) == []


def test_nagios_perfdata_carries_the_levels_each_value_was_judged_against():
    record = judged("slow:all_reduce")
    perf = parse_nagios(nagios.render(record))[2]
    for c in record.node_checks:
        if c.reading is not None:
            label = nagios.LABELS.get(c.key, c.key) + ("_GBps" if c.reading.unit == "GB/s" else "")
            levels = [None if v is None else nagios.number(v) + (":" if c.reading.floor else "")
                      for v in (c.reading.warning, c.reading.critical)]
            assert [perf[label]["warn"] or None, perf[label]["crit"] or None] == levels, label
    assert perf["copy_ceiling_GBps"]["warn"] == perf["copy_ceiling_GBps"]["crit"] == "", "no check judged it"


def test_junit_follows_jenkins_schema_and_counts_what_does_not_apply_as_skipped(case):
    record, status, _ = case
    root = ET.fromstring(junit.render(record, hostname="node7"))
    assert junit_problems(root) == []
    suite = root.find("testsuite")
    skipped = [c for c in suite.iter("testcase") if c.find("skipped") is not None]
    assert len(skipped) == int(suite.get("skipped")) == sum(c.shown is Verdict.SKIP and c.status is Status.OK
                                                         for c in record.node_checks)
    if status is not Status.UNKNOWN:  # the fixture is one host CPU: "one rank per device" does not apply
        assert [c.get("name") for c in skipped] == ["2 ranks, one per device [env.2_ranks_one_per_device]"]
        assert "does not apply here" in skipped[0].find("skipped").get("message")


def test_the_textfile_passes_promtool(case):
    """`promtool check metrics` where installed, else its lint rules over prometheus_client's parse."""
    record, _, _ = case
    assert promtool_problems(prometheus.render(record)) == []


@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool is not installed (Debian: apt install prometheus)")
def test_promtool_and_the_lint_agree_on_the_textfile_and_on_a_summary_label_on_a_gauge():
    text = prometheus.render(judged())
    wrong = text.replace('stat="p50"', 'quantile="0.5"')
    assert promtool_problems(text) == lint(text) == []
    assert any('non-summary metrics should not have "quantile" label' in p for p in promtool_problems(wrong))


def test_the_lint_finds_what_promtool_finds():
    """The rules the lint stands in for, each on a file that breaks it (what promtool 2.42 says of each)."""
    bad = ("# HELP x_seconds_total a\n# TYPE x_seconds_total gauge\nx_seconds_total 1\n"
           "# HELP y_milliseconds b\n# TYPE y_milliseconds gauge\ny_milliseconds{quantile=\"0.5\"} 1\n"
           "# TYPE z_gauge gauge\nz_gauge 1\n# HELP w_requests c\n# TYPE w_requests counter\nw_requests_total 1\n")
    said = "\n".join(lint(bad))
    for problem in ('non-counter metrics should not have "_total" suffix', 'use base unit "seconds" instead of '
                    '"milliseconds"', 'non-summary metrics should not have "quantile" label', "no help text",
                    "metric name should not include type 'gauge'"):
        assert problem in said, problem
