"""JUnit XML for CI systems: one testcase per check, in one testsuite (the layout Jenkins, GitLab and GitHub's
test reporters read: testsuites > testsuite(name, tests, failures, errors, skipped, time, timestamp) >
testcase(name, classname, time) > failure or error (message, type)).

    CRITICAL  <failure message="..." type="CRITICAL">
    UNKNOWN   <error message="..." type="UNKNOWN">: the check could not judge it
    WARNING   passes, with <system-out>WARNING: ...</system-out> and a property status=WARNING: ddplab's own
              convention (a warning is not a failed run); a thresholds file makes a bound critical to fail it
"""

from __future__ import annotations

import datetime
import xml.etree.ElementTree as ET
from pathlib import Path

from ..record import CheckRecord, Status


def render(record: CheckRecord, hostname: str = "") -> str:
    checks = record.node_checks
    counts = dict(tests=len(checks), failures=sum(c.status is Status.CRITICAL for c in checks),
                  errors=sum(c.status is Status.UNKNOWN for c in checks), skipped=0)
    timestamp = datetime.datetime.fromtimestamp(record.finished_unix, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S")
    total = f"{record.duration_s or 0.0:.3f}"
    root = ET.Element("testsuites", name="ddplab check", time=total, **{k: str(v) for k, v in counts.items()})
    suite = ET.SubElement(root, "testsuite", name=f"ddplab check{' ' + hostname if hostname else ''}",
                          timestamp=timestamp, time=total, hostname=hostname or "unknown",
                          **{k: str(v) for k, v in counts.items()})
    props = ET.SubElement(suite, "properties")
    for name, value in (("status", record.status.label), ("machine", str(record.machine or "unknown")),
                        ("expectations", "; ".join(record.expectations)),
                        *((("injected", "; ".join(record.injected)),) if record.injected else ())):
        ET.SubElement(props, "property", name=name, value=value)
    for c in checks:
        case = ET.SubElement(suite, "testcase", name=f"{c.name} [{c.key}]", classname=f"ddplab.check.{c.stage}",
                             time=f"{c.duration_s or 0.0:.3f}")
        detail = f"{c.message}\nrule: {c.rule}\nnext step: {c.next_step}"
        if c.status is Status.CRITICAL:
            ET.SubElement(case, "failure", message=c.message, type=c.status.label).text = detail
        elif c.status is Status.UNKNOWN:
            ET.SubElement(case, "error", message=c.message, type=c.status.label).text = detail
        elif c.status is Status.WARNING:
            case_props = ET.SubElement(case, "properties")
            ET.SubElement(case_props, "property", name="status", value=c.status.label)
            ET.SubElement(case, "system-out").text = f"WARNING: {detail}"
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write(record: CheckRecord, path: str | Path, hostname: str = "") -> Path:
    from ...files import write_text_atomic

    return write_text_atomic(path, render(record, hostname), make_parents=True)
