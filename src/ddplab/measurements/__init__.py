"""The library: one module per measurement, each the same shape (records.core.Kind).

    NAME        the command word and the report's "command"
    SUMMARY     one line for --help and the docs
    Config      a frozen dataclass, validated on construction, whose fields make the command's options
    Record      the frozen results record (records/), flattened into the report's "results"
    run(config, observer=QUIET) -> Record       refuses (DdplabError) before it starts anything
    checks(record) -> list[Check]               the ONE rule: the report's verdict is the worst of these
    summary(record) -> str                      one line for the terminal and the lab's stage table
    config_as_run(config, record) -> Config     optional: the config with what was chosen at run time (sweep: -R)

`run`, `launch`, `clean` and `compare` write reports of the same shape (catalog.OTHER_KINDS). A new measurement is one
module here plus one registry line; ``register`` adds one from outside (a plug-in, a test) without touching commands,
checks, the HTML report or compare.

``judged_by`` judges a report again from its data by its kind's ``checks``, a lab's stage by stage, so that a stored
PASS never stands beside data that fails: the lab as its stages end (lab/run.py), catalog.judged any report read back.
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from types import ModuleType
from typing import TYPE_CHECKING

from ..errors import invalid_choice
from ..records import Check, Report, Verdict
from ..records.core import make_report, rows_of, verdict_of

if TYPE_CHECKING:
    from ..records.run import StageRecord

MEASUREMENTS: dict[str, str] = {
    "env": "ddplab.measurements.env",
    "train": "ddplab.measurements.train",
    "storm": "ddplab.measurements.storm",
    "sweep": "ddplab.measurements.sweep",
    "ceiling": "ddplab.measurements.ceiling",
    "contention": "ddplab.measurements.contention",
    "drill": "ddplab.measurements.drill",
    "pairwise": "ddplab.measurements.pairwise",
}
_registered: dict[str, ModuleType] = {}


def register(module) -> None:
    """Add a measurement (any object with the shape above) under its NAME."""
    _registered[module.NAME] = module
    MEASUREMENTS.setdefault(module.NAME, f"<registered {module.NAME}>")


def get(name: str):
    if name in _registered:
        return _registered[name]
    if name not in MEASUREMENTS:
        raise invalid_choice("measurement", name, MEASUREMENTS)
    return importlib.import_module(MEASUREMENTS[name])


LEFTOVERS = "leftovers"  # the lab's last stage: what its stages left running


def stage_checks(stage: StageRecord) -> list[Check]:
    """The verdict table's rows for one stage: its measurement's own checks, or why it has none."""
    if stage.name == LEFTOVERS:
        return [Check("nothing left running", stage.verdict, stage.summary, "0 processes",
                      "every process the lab's stages started is gone (orphans of other runs are shown, not counted)",
                      "none" if stage.verdict is Verdict.PASS else "`ddplab clean` lists them; report the stage that "
                                                                   "left them", stage=stage.name)]
    if stage.report is None:
        return [Check("stage ran", stage.verdict, stage.summary, "completes", "the stage could not run here",
                      "see the stage's error; `ddplab env` shows what this machine lacks", stage=stage.name)]
    return [replace(c, stage=stage.name) for c in report_checks(stage.report)]


def report_checks(report: Report) -> list[Check]:
    """The check rows of a report: its measurement's ``checks(record)``; the record's own where it names no
    measurement (records.core.rows_of: the lab's, a job's, a clean's, a comparison's, a check's)."""
    measurement = _measurement(report.command)
    if measurement is not None:
        return measurement.checks(report.results)
    return rows_of(replace(report, checks=None))


def _measurement(command: str):
    """The measurement named, as registered now (``register`` adds one at any time)."""
    return get(command) if command in MEASUREMENTS else None


def judged_by(kind, report: Report) -> Report:
    """``report`` with its verdicts derived again from its data by ``kind`` (None: it keeps what it recorded), by the
    rule that made them (the worst of its kind's checks), a lab's stage by stage first, so a stored PASS never stands
    beside data that fails. A stage that ran nothing, and a check's report (the runners' scale), keep theirs."""
    results = report.results
    if report.command == "run":
        stages = [_judged_stage(s) for s in results.stages]
        results = replace(results, stages=stages, checks=[c for s in stages for c in stage_checks(s)])
    checks = tuple(kind.checks(results)) if kind is not None else ()
    if not checks:  # nothing to judge it by: it keeps what it recorded
        return replace(report, results=results)
    return replace(report, results=results, verdict=Verdict.worst(c.verdict for c in checks), checks=checks)


def _judged_stage(stage: StageRecord) -> StageRecord:
    if stage.report is not None:
        measurement = _measurement(stage.report.command)
        report = judged_by(measurement, stage.report)
        summary = measurement.summary(report.results) if measurement is not None else stage.summary
        return replace(stage, report=report, verdict=report.verdict, summary=summary)
    if stage.name == LEFTOVERS:
        return replace(stage, verdict=Verdict.PASS if not stage.left_pids and not stage.orphans else Verdict.FAIL)
    return stage


verdict = verdict_of
report = make_report  # the JSON document of one measurement: its config, the platform, the record, its checks

__all__ = ["Check", "MEASUREMENTS", "get", "make_report", "register", "report", "verdict"]
