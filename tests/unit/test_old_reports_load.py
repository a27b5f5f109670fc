"""Reports written by earlier versions (schema 1) still load through the records: `compare` and `ddplab report`
read last month's JSON (issue 11: keep compare reading the old version)."""

import json
from pathlib import Path

import pytest

from ddplab.reading.catalog import report_from_json

ROOT = Path(__file__).resolve().parents[2]


def _is_report(path: Path) -> bool:
    """A ddplab report (an object with a schema version), not another result file (a list of runs, a summary)."""
    doc = json.loads(path.read_text())
    return isinstance(doc, dict) and doc.get("schema_version") is not None


REPORTS = sorted(p for p in (ROOT / "docs" / "results").rglob("*.json") if _is_report(p))


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: str(p.relative_to(ROOT / "docs" / "results")))
def test_a_committed_report_reads_back(path):
    data = json.loads(path.read_text())
    report = report_from_json(data)
    assert report.command == data["command"] and str(report.verdict) == data["verdict"]


def test_the_fixture_quick_report_reads_back():
    report = report_from_json(json.loads((ROOT / "tests" / "fixtures" / "report-quick-cpu.json").read_text()))
    assert [s.name for s in report.results.stages][-1] == "leftovers"
