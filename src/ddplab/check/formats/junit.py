"""JUnit XML for CI systems: one testcase per check, in one testsuite, in the layout Jenkins' JUnit schema (the
xunit plugin's junit-10.xsd) allows and GitLab's and GitHub's test reporters read:

    testsuites(name, tests, failures, errors, time)
      testsuite(name, tests, failures, errors, skipped, time, timestamp, hostname)
        properties > property(name, value)
        testcase(name, classname, time) > failure | error | skipped, system-out

    CRITICAL        <failure message="..." type="CRITICAL">
    UNKNOWN         <error message="..." type="UNKNOWN">: the check could not judge it (a stage could not run
                    here, or the check was stopped: the stop's own row says by what, and what was not run)
    does not apply  <skipped message="..."/>: a row of a stage that ran which does not apply to this node
    WARNING         passes, with <system-out>WARNING: ...</system-out>: ddplab's own convention (a warning is not
                    a failed run); a thresholds file makes a bound critical to fail it

The counts are the children's: failures, errors and skipped count the elements written.
"""

from __future__ import annotations

import datetime
import xml.etree.ElementTree as ET
from pathlib import Path

from ...basics.files import write_text_atomic
from ...records import Verdict
from ..record import CheckRecord, NodeCheck, Status


def render(record: CheckRecord, hostname: str = "") -> str:
    checks = record.node_checks
    counts = dict(tests=len(checks), failures=sum(c.status is Status.CRITICAL for c in checks),
                  errors=sum(c.status is Status.UNKNOWN for c in checks),
                  skipped=sum(_skipped(c) for c in checks))
    timestamp = datetime.datetime.fromtimestamp(record.finished_unix, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S")
    total = f"{record.duration_s or 0.0:.3f}"
    # testsuites has no "skipped" in the schema: the suite carries it
    root = ET.Element("testsuites", name="ddplab check", time=total,
                      **{k: str(v) for k, v in counts.items() if k != "skipped"})
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
        elif _skipped(c):
            ET.SubElement(case, "skipped", message=f"{c.message}: {c.rule}")
        elif c.status is Status.WARNING:
            ET.SubElement(case, "system-out").text = f"WARNING: {detail}"
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _skipped(check: NodeCheck) -> bool:
    return check.shown is Verdict.SKIP and check.status is Status.OK


def write(record: CheckRecord, path: str | Path, hostname: str = "") -> Path:
    return write_text_atomic(path, render(record, hostname), make_parents=True)
