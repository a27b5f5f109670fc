"""TRANSITIONAL (issue 11): `ddplab compare` on a `ddplab run` report while this build has no RunRecord.

The lab's report becomes a record (records/run.py, RunRecord with ``timed_rows`` and ``stage_verdicts``)
in the lead's part of the redesign. Until that is registered (``records.types_for("run")``), a lab report
is checked as before (report_schema.py) and its timings are read as before, into the same shapes the
RunRecord gives, so compare itself already works the new way. Delete this module, its one call in
comparison.py and report_schema.py's compare path together once RunRecord is registered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .records import RecordError, Report, Verdict, types_for
from .records.compare import TimedRow, stage_rows


def applies(doc: Any) -> bool:
    """A lab report, in a build where the records cannot read one yet."""
    if not (isinstance(doc, dict) and doc.get("command") == "run"):
        return False
    try:
        types_for("run")
    except RecordError:
        return True
    return False


def read(doc: dict, path: str) -> Report:
    from .report_schema import check_document

    check_document(doc, path)  # exit 2 naming the field, exactly as before
    stages = [_Stage(s["name"], _verdict(s["verdict"]), _stage_report(s.get("report"))) for s in
              doc["results"].get("stages", [])]
    return Report(command="run", config=None, platform=None, results=_Run(stages), verdict=_verdict(doc["verdict"]))


def _verdict(text: str) -> Verdict:
    try:
        return Verdict(text)
    except ValueError:
        return Verdict.FAIL  # an unknown verdict counted as the worst, as before


@dataclass(frozen=True)
class _Timings:
    """A stage's own report, read the way compare read it before the records."""

    doc: dict

    def timed_rows(self, config=None) -> list[TimedRow]:
        command, results = self.doc["command"], self.doc["results"]
        if command == "sweep":
            return [TimedRow(r["op"], r["size_bytes"], r["in_place"], r["time_us"], r.get("busbw_gbps"),
                             r.get("num_wrong")) for r in results.get("rows", []) if r.get("time_us")]
        if command == "storm" and results.get("completed"):
            return [TimedRow("storm", self.doc["config"]["bytes"], True, results["mean_us"])]
        if command == "train" and results.get("completed"):
            return [TimedRow("train", 0, True, results["step_time_us"]["p50"])]
        return []


def _stage_report(doc: dict | None) -> Report | None:
    if doc is None:
        return None
    return Report(command=doc["command"], config=None, platform=None, results=_Timings(doc),
                  verdict=_verdict(doc["verdict"]))


@dataclass(frozen=True)
class _Stage:
    name: str
    verdict: Verdict
    report: Report | None


@dataclass(frozen=True)
class _Run:
    stages: list[_Stage]

    def timed_rows(self, config=None) -> list[TimedRow]:
        return [row for s in self.stages if s.report is not None for row in stage_rows(s.name, s.report)]

    def stage_verdicts(self) -> dict[str, Verdict]:
        return {s.name: s.verdict for s in self.stages}
