"""CheckRecords built in memory for `ddplab check`'s tests: the quick lab report in tests/fixtures (a healthy CPU
run) judged as the check judges it, with the faults the tests need put in through the check's own seam
(check/inject.py for rows; a stage replaced for leftovers and stages that could not run)."""

from __future__ import annotations

from dataclasses import replace

from ddplab.check.inject import apply_row_faults
from ddplab.check.judge import Expectations, Stop, judge
from ddplab.check.record import CheckRecord
from ddplab.records import Verdict
from ddplab.records.clean import Orphan
from ddplab.reading.catalog import read_report
from ddplab.records.run import StageRecord
from tests.crafted_reports import FIXTURE

ORPHAN = Orphan(pid=4242, ppid=1, create_time=1.0, age_s=60.0, cmdline="python train.py", device_mem_bytes=None,
                run_id="train-earlier-job", reason="ddplab rank of run train-earlier-job; its launcher is gone")


def fixture():
    return read_report(str(FIXTURE))


def stages_of(report=None) -> list[StageRecord]:
    return list((report or fixture()).results.stages)


def with_orphan(stages: list[StageRecord]) -> list[StageRecord]:
    """The environment survey found an orphaned rank of an earlier job (a leftover on the node)."""
    out = []
    for s in stages:
        if s.name == "env":
            results = s.report.results
            survey = replace(results.survey, orphans=[ORPHAN])
            s = replace(s, report=replace(s.report, results=replace(results, survey=survey)))
        out.append(s)
    return out


def with_stage_skipped(stages: list[StageRecord], name: str, why: str = "device \"cuda\" is not available") \
        -> list[StageRecord]:
    return [StageRecord(s.name, s.command, Verdict.SKIP, why, 0.1, error="device-unavailable") if s.name == name
            else s for s in stages]


def judged(*inject: str, stages: list[StageRecord] | None = None, expectations: Expectations = Expectations(),
           stop: Stop | None = None) -> CheckRecord:
    report = fixture()
    stages = stages if stages is not None else stages_of(report)
    return judge(apply_row_faults(stages, inject), report.platform, expectations, stop=stop, deadline_s=50.0,
                 duration_s=21.5, out="/tmp/check", injected=list(inject))
