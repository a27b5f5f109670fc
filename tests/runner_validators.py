"""What the runners' own validators say of ddplab check's files, for the tests.

promtool_problems: `promtool check metrics` where promtool is installed (Debian's `prometheus` package has it; CI
has no apt step), else the same lint rules (client_golang's promlint, which promtool runs) over the file as
prometheus_client's parser reads it.

junit_problems: the rules of Jenkins' JUnit schema (the xunit plugin's junit-10.xsd), which junitparser and GitLab
read the same way: the elements each element may hold, its required and optional attributes, and the time format.
"""

from __future__ import annotations

import re
import shutil
import subprocess

from prometheus_client.parser import text_string_to_metric_families

# ------------------------------------------------------------------------------------------------ Prometheus

# promlint's rules, in its order: help text, base units, counters and _total, names and labels that histograms and
# summaries reserve, the type in the name, ':' in names, camelCase, abbreviated units.
BASE_UNITS = {"amperes", "bytes", "celsius", "grams", "joules", "kelvin", "meters", "metres", "seconds", "volts"}
OTHER_UNITS = {"minutes": "seconds", "hours": "seconds", "days": "seconds", "weeks": "seconds", "kelvins": "kelvin",
               "fahrenheit": "celsius", "rankine": "celsius", "inches": "meters", "yards": "meters",
               "miles": "meters", "bits": "bytes", "calories": "joules", "pounds": "grams", "ounces": "grams"}
UNIT_PREFIXES = ("pico", "nano", "micro", "milli", "centi", "deci", "deca", "hecto", "kilo", "kibi", "mega", "mibi",
                 "giga", "gibi", "tera", "tebi", "peta", "pebi")
ABBREVIATIONS = ("s", "ms", "us", "ns", "sec", "b", "kb", "mb", "gb", "tb", "pb", "m", "h", "d")
TYPES_IN_NAMES = ("counter", "gauge", "summary", "histogram", "gauge_histogram")


def promtool_problems(text: str) -> list[str]:
    """What `promtool check metrics` says of ``text`` (empty: it passes); the lint below where it is missing."""
    if shutil.which("promtool"):
        done = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True,
                              timeout=60)
        said = (done.stdout + done.stderr).strip()
        return [line for line in said.splitlines() if line] if done.returncode != 0 or said else []
    return lint(text)


def lint(text: str) -> list[str]:
    problems = []
    for family in text_string_to_metric_families(text):
        # the parser names a counter's family without _total; promlint sees the sample's name
        name = family.samples[0].name if family.type == "counter" and family.samples else family.name
        say = lambda what, name=name: problems.append(f"{name} {what}")  # noqa: E731
        if not family.documentation:
            say("no help text")
        if family.type == "unknown":
            say("no TYPE line")
        unit = _unit_in(name)
        if unit is not None and unit[0] != unit[1]:
            say(f'use base unit "{unit[1]}" instead of "{unit[0]}"')
        if family.type == "counter" and not name.endswith("_total"):
            say('counter metrics should have "_total" suffix')
        if family.type not in ("counter", "unknown") and name.endswith("_total"):
            say('non-counter metrics should not have "_total" suffix')
        if family.type != "histogram" and name.endswith("_bucket"):
            say('non-histogram metrics should not have "_bucket" suffix')
        if family.type not in ("histogram", "summary") and name.endswith(("_count", "_sum")):
            say("non-histogram and non-summary metrics should not have a _count or _sum suffix")
        labels = {label for sample in family.samples for label in sample.labels}
        if family.type not in ("histogram", "unknown") and "le" in labels:
            say('non-histogram metrics should not have "le" label')
        if family.type not in ("summary", "unknown") and "quantile" in labels:
            say('non-summary metrics should not have "quantile" label')
        for kind in TYPES_IN_NAMES:
            if f"_{kind}_" in name or name.endswith(f"_{kind}"):
                say(f"metric name should not include type '{kind}'")
        if ":" in name:
            say("metric names should not contain ':'")
        if re.search("[a-z][A-Z]", name) or any(re.search("[a-z][A-Z]", label) for label in labels):
            say("metric and label names should be written in 'snake_case' not 'camelCase'")
        if any(f"_{a}_" in name.lower() or name.lower().endswith(f"_{a}") for a in ABBREVIATIONS):
            say("metric names should not contain abbreviated units")
    return problems


def _unit_in(name: str) -> tuple[str, str] | None:
    """The first word of ``name`` that is a unit, with its base unit (promlint's metricUnits)."""
    units = {**{u: u for u in BASE_UNITS}, **OTHER_UNITS}
    for part in name.split("_"):
        if part in units:
            return part, units[part]
        for prefix in UNIT_PREFIXES:
            if part.startswith(prefix) and part[len(prefix):] in units:
                return part, units[part[len(prefix):]]
    return None


# ------------------------------------------------------------------------------------------------ JUnit

# element: (required attributes, optional attributes, children allowed)
_OUTCOME = ((), {"type", "message"}, set())
JUNIT_SCHEMA = {
    "testsuites": ((), {"name", "time", "tests", "failures", "errors"}, {"testsuite"}),
    "testsuite": (("name", "tests", "failures", "errors"),
                  {"group", "time", "skipped", "timestamp", "hostname", "id", "package", "file", "log", "url"},
                  {"testsuite", "properties", "testcase", "system-out", "system-err"}),
    "properties": ((), set(), {"property"}),
    "property": (("name", "value"), set(), set()),
    "testcase": (("name",), {"time", "classname", "group"},
                 {"skipped", "error", "failure", "rerunFailure", "rerunError", "flakyFailure", "flakyError",
                  "system-out", "system-err"}),
    "failure": _OUTCOME, "error": _OUTCOME, "skipped": _OUTCOME,
    "system-out": ((), set(), set()), "system-err": ((), set(), set()),
}
# The schema's time of a suite: digits, thousands separated by commas or not, and a decimal part.
SUITE_TIME = re.compile(r"(([0-9]{0,3},)*[0-9]{3}|[0-9]{0,3})*(\.[0-9]*)?")


def junit_problems(root) -> list[str]:
    """Where the tree under ``root`` (an ElementTree element) leaves the schema; empty: valid."""
    problems = []

    def visit(element, path):
        rule = JUNIT_SCHEMA.get(element.tag)
        if rule is None:
            problems.append(f"{path}: no element {element.tag} in the schema")
            return
        required, optional, children = rule
        for attr in required:
            if element.get(attr) is None:
                problems.append(f"{path}: missing the required attribute {attr}")
        for attr in element.attrib:
            if attr not in required and attr not in optional:
                problems.append(f"{path}: attribute {attr} is not in the schema")
        if element.tag in ("testsuite", "testsuites") and element.get("time") is not None \
                and not SUITE_TIME.fullmatch(element.get("time")):
            problems.append(f"{path}: time {element.get('time')!r} is not a SUREFIRE_TIME")
        for child in element:
            if child.tag not in children:
                problems.append(f"{path}: {child.tag} may not be inside {element.tag}")
            visit(child, f"{path}/{child.tag}")

    visit(root, root.tag)
    return problems
