"""One judge for every way a rank can fail (issue 17): a fault drill of the lab and the user's own job under
`ddplab launch` go through the same supervised path (supervision/job.py run_job), are judged by the same function
(supervision/judge.name_culprit) and produce the same record types (records/supervision.py Culprit and Hang)."""

from dataclasses import fields

import pytest

from ddplab.records.drill import DrillOutcome
from ddplab.records.launch import LaunchRecord
from ddplab.records.session import SessionRecord
from ddplab.records.supervision import Culprit, Hang
from ddplab.supervision import job as supervised
from ddplab.supervision import judge

pytestmark = pytest.mark.slow


def _field_type(cls, name: str):
    return {f.name: f.type for f in fields(cls)}[name]


def test_the_lab_and_launch_keep_the_same_culprit_and_hang_records():
    for record in (SessionRecord, LaunchRecord):
        assert "Culprit | None" in str(_field_type(record, "culprit"))
        assert "Hang | None" in str(_field_type(record, "hang"))
    assert DrillOutcome.__dataclass_fields__["session"].type.startswith("SessionRecord")


def test_a_drill_and_a_users_job_are_judged_by_the_same_function_on_the_same_path(tmp_path, monkeypatch):
    from ddplab.commands.launch import parse
    from ddplab.records.config import LaunchOptions
    from ddplab.measurements.drill import DrillConfig
    from ddplab.drills.runner import DrillContext
    from ddplab.drills import kill_rank
    from ddplab.job.run import run as launch
    from ddplab.job.session import Observer, prepare

    seen = []
    judged, ran = judge.name_culprit, supervised.run_job

    def spy_judge(*args, **kwargs):
        culprit = judged(*args, **kwargs)
        seen.append(("judged", culprit))
        return culprit

    def spy_run(spec):
        seen.append(("run_job", spec.entrypoint))
        return ran(spec)

    monkeypatch.setattr(judge, "name_culprit", spy_judge)
    monkeypatch.setattr(supervised, "run_job", spy_run)
    import ddplab.job.supervise
    import ddplab.job.session
    monkeypatch.setattr(ddplab.job.session, "run_job", spy_run)
    monkeypatch.setattr(ddplab.job.supervise, "run_job", spy_run)

    config = DrillConfig(launch=LaunchOptions(timeout_s=8, run_dir=str(tmp_path / "drill")), drills=("kill_rank",))
    platform, placement = prepare(config.launch)
    drill = kill_rank.run(DrillContext(config, "kill_rank", platform, placement, Observer()))
    from_drill = [x for x in seen if x[0] == "judged"]
    report = launch(parse(["--nproc-per-node", "2", "--hang-timeout", "5", "--out", str(tmp_path / "job"), "-m",
                           "ddplab.drills.script", "--fault", "exit", "--victim", "1"]))
    from_launch = [x for x in seen if x[0] == "judged"][len(from_drill):]

    runs = [entry for kind, entry in seen if kind == "run_job"]
    assert len(runs) == 2 and runs[0] == runs[1], runs  # the same entrypoint: the interpreter running job/boot.py
    assert len(from_drill) == 1 and len(from_launch) == 1
    drill_culprit, launch_culprit = from_drill[0][1], from_launch[0][1]
    assert type(drill_culprit) is type(launch_culprit) is Culprit
    assert drill.session.culprit == drill_culprit and drill_culprit.ranks == [1]
    assert report.culprit == launch_culprit and launch_culprit.ranks == [1]
    assert (drill_culprit.kind, launch_culprit.kind) == ("died", "died")  # SIGKILL from outside; os._exit(3)
    assert Hang is type(drill.session.hang) or drill.session.hang is None
