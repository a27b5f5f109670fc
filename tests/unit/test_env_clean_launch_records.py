"""`env`, `clean` and `launch` as records (issue 11): their reports read back into typed records, their
Configs survive their own command lines, and their check rows give the verdicts the commands gave before."""

import argparse
import copy
import json
from pathlib import Path

import pytest

from ddplab.commands import clean as clean_command
from ddplab.commands import env as env_command
from ddplab.commands import launch as launch_command
from ddplab.lab.clean import CleanConfig
from ddplab.job.config import Target, UserJobConfig
from ddplab.measurements.env import EnvConfig
from ddplab.errors import UsageError
from ddplab.measurements import env as env_measurement
from ddplab.records import Report, Verdict
from ddplab.records.clean import CleanRecord, Ended, GoneProcess, Orphan, OtherProcess, Survey
from ddplab.records.codec import from_json, to_json
from ddplab.records.env import TwoRankPlan
from ddplab.records.launch import JobHost, LaunchRecord
from ddplab.reading.catalog import report_from_json
from tests.unit import fakes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LAUNCH_REPORT = FIXTURES / "launch-report-skipped-collective.json"

ORPHAN = Orphan(pid=4242, ppid=1, create_time=1.5, age_s=3.0, cmdline="python worker.py", device_mem_bytes=None,
                run_id="train-x", reason="its launcher is gone")
OTHER = OtherProcess(pid=77, user="alice", program="python train.py", create_time=2.0, age_s=9.0,
                     device_mem_bytes=1 << 30, holds_device_node=True, not_orphan_because="no launcher marked it")


def _parsed(command, argv: list[str]):
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    return command.config_from_args(parser.parse_args(argv))


# ------------------------------------------------------------------------------------------ JSON keys

def test_orphan_and_other_process_keep_their_keys():
    """The golden test cannot pin them (whether a machine has orphans is not the code's doing): pinned here."""
    assert set(to_json(ORPHAN)) == {"pid", "ppid", "create_time", "age_s", "cmdline", "device_mem_bytes", "run_id",
                                    "reason"}
    assert set(to_json(OTHER)) == {"pid", "user", "program", "create_time", "age_s", "device_mem_bytes",
                                   "holds_device_node", "not_orphan_because"}


def test_an_optional_flattened_part_that_was_not_written_reads_back_as_none():
    refused = TwoRankPlan(2, False, "needs 2 devices; this machine has 1")
    assert to_json(refused) == {"nproc": 2, "will_work": False, "reason": "needs 2 devices; this machine has 1"}
    assert from_json(TwoRankPlan, to_json(refused)) == refused


# ------------------------------------------------------------------------------------------ configs

@pytest.mark.parametrize("config", [EnvConfig(), EnvConfig(device="cpu")])
def test_env_config_survives_its_command_line(config):
    assert _parsed(env_command, config.to_argv()) == config


@pytest.mark.parametrize("config", [CleanConfig(), CleanConfig(yes=True, grace_s=0.5),
                                    CleanConfig(pid=4242, yes=True)])
def test_clean_config_survives_its_command_line(config):
    assert _parsed(clean_command, config.to_argv()) == config


@pytest.mark.parametrize("argv", [
    ["--nproc-per-node", "2", "--hang-timeout", "7", "--out", "job", "--", "train.py", "--lr", "0.1", "--out", "x"],
    ["--ras", "--nproc-per-node", "2", "train.py", "--ras"],
    ["--standalone", "--nnodes", "1:2", "--max-restarts", "3", "train.py"],
    ["--hang-timeout", "0", "-m", "json.tool", "--sort-keys"],
    ["--no-python", "--redirects", "3", "--local-ranks-filter", "0", "echo", "hi", "--", "there"],
    ["--duplicate-stdout-filters", "a,b", "--rdzv-conf", "timeout=5", "train.py"],
])
def test_launch_config_survives_its_command_line(argv):
    config = launch_command.parse(argv)
    assert launch_command.parse(config.to_argv()) == config


def test_launch_config_keeps_what_was_typed():
    config = launch_command.parse(["--hang-timeout", "0", "-m", "json.tool", "--sort-keys"])
    assert config.target == Target("module", "json.tool", ("--sort-keys",))
    assert config.hang_timeout_s is None  # 0 turns it off
    assert config.torchrun["module"] is True and config.torchrun["rdzv_backend"] == "static"
    assert not {"training_script", "training_script_args", "ddplab_hang_timeout", "ddplab_out",
                "ddplab_ras"} & set(config.torchrun)
    assert config.ras is False  # off unless asked for


def test_ras_is_ddplabs_before_the_script_and_the_scripts_after_it():
    config = launch_command.parse(["--ras", "train.py", "--ras"])
    assert config.ras is True and config.target.args == ("--ras",)
    assert "--ras" in config.to_argv()[:-2]
    assert launch_command.parse(["train.py", "--ras"]).ras is False


@pytest.mark.parametrize("kwargs, reference", [
    ({"hang_timeout_s": -1.0}, "invalid-hang-timeout"),
    ({"hang_timeout_s": float("nan")}, "invalid-hang-timeout"),
    ({"torchrun": {"run_path": True}}, "unsupported-option"),
])
def test_launch_config_refuses_bad_values(kwargs, reference):
    with pytest.raises(UsageError) as err:
        UserJobConfig(target=Target("script", "train.py"), **kwargs)
    assert err.value.reference == reference


# ------------------------------------------------------------------------------------------ env

def test_env_report_reads_back_and_its_checks_judge_the_same(monkeypatch):
    monkeypatch.setattr(env_measurement, "survey_device", lambda platform: Survey([], []))  # not this machine's
    doc, _ = fakes.env_screen(monkeypatch, fakes.musa(2))
    report = report_from_json(json.loads(json.dumps(doc)))
    assert report.config == EnvConfig() and report.platform.device_type == "musa"
    assert report.results.platform == report.platform  # the envelope's machine, back beside the results
    rows = env_measurement.checks(report.results)
    assert [(c.check, c.verdict) for c in rows] == [
        ("collective backend available", Verdict.PASS), ("2 ranks, one device", Verdict.WARN),
        ("2 ranks, one per device", Verdict.PASS), ("orphaned processes", Verdict.PASS)]
    assert report.verdict == Verdict.WARN == Verdict.worst(c.verdict for c in rows)
    assert "MCCL with several ranks per device is unverified" in rows[1].value


def test_env_warns_when_the_policy_refuses_a_placement_and_not_when_devices_are_missing():
    refused = TwoRankPlan(2, False, 'NVIDIA devices need backend "nccl", which this torch build lacks',
                          error="backend-missing")
    missing = TwoRankPlan(2, False, "needs 2 devices; this machine has 1")
    assert env_measurement.plan_check("shared_device", refused).verdict == Verdict.WARN
    assert env_measurement.plan_check("per_device", missing).verdict == Verdict.SKIP  # nothing to judge
    assert to_json(refused)["error"] == "backend-missing" and "error" not in to_json(missing)


def test_env_names_the_orphans_in_a_warning_and_other_processes_only_as_information():
    rows = Survey([ORPHAN], [OTHER]).checks()
    assert [(c.check, c.verdict, c.value) for c in rows] == [
        ("orphaned processes", Verdict.WARN, "1"),
        ("other processes on the device", Verdict.INFO, "1: 77 python train.py")]


# ------------------------------------------------------------------------------------------ clean

def _clean(**kw) -> CleanRecord:
    return CleanRecord(survey=kw.pop("survey", Survey([ORPHAN], [OTHER])), **kw)


GONE_BY_TERM = Ended(terminated=[ORPHAN.pid], killed=[], survived=[], refused=[])


@pytest.mark.parametrize("record, verdict", [
    (_clean(survey=Survey([], [OTHER])), Verdict.PASS),  # nothing to end
    (_clean(), Verdict.WARN),  # orphans wait for --yes
    (_clean(ended=GONE_BY_TERM, memory_returned=True, memory_still_held={}), Verdict.PASS),
    (_clean(ended=GONE_BY_TERM, memory_returned=None, memory_still_held={}), Verdict.PASS),  # no per-process API
    (_clean(ended=Ended([], [], [ORPHAN.pid], []), memory_returned=False, memory_still_held={4242: 1}), Verdict.FAIL),
    (_clean(ended=Ended([], [], [], [ORPHAN.pid]), memory_returned=True, memory_still_held={}), Verdict.FAIL),
    (_clean(ended=GONE_BY_TERM, memory_returned=False, memory_still_held={4242: 1}), Verdict.FAIL),
    (_clean(named=OTHER), Verdict.WARN),  # --pid without --yes: shown, waits
    (_clean(named=GoneProcess(9)), Verdict.PASS),
    (_clean(named=OTHER, ended=Ended([77], [], [], []), memory_returned=True, memory_still_held={}), Verdict.PASS),
])
def test_clean_verdict_is_the_one_clean_gave_before(record, verdict):
    """Before: WARN while targets wait for --yes; FAIL when one survived, was refused, or kept its memory."""
    assert Verdict.worst(c.verdict for c in record.checks()) == verdict


def test_clean_report_reads_back_whichever_process_was_named():
    for named in (ORPHAN, OTHER, GoneProcess(9), None):
        record = _clean(named=named)
        doc = Report(command="clean", config=CleanConfig(pid=9), platform=None, results=record,
                     verdict=Verdict.WARN).to_json()
        back = report_from_json(json.loads(json.dumps(doc)))
        assert back.results == record and back.config == CleanConfig(pid=9)
    assert to_json(GoneProcess(9)) == {"pid": 9, "gone": True}  # as before


# ------------------------------------------------------------------------------------------ launch

def test_a_launch_report_reads_back_as_a_launch_record():
    doc = json.loads(LAUNCH_REPORT.read_text())
    report = report_from_json(copy.deepcopy(doc))
    record = report.results
    assert isinstance(record, LaunchRecord) and isinstance(report.platform, JobHost)
    # Written before --ras existed: it reads back with RAS off, and everything else as it was written.
    config = to_json(report.config)
    assert config.pop("ras") is False and "ras" not in doc["config"]
    assert (to_json(record), config, to_json(report.platform)) == (doc["results"], doc["config"], doc["platform"])
    assert record.timeseries is None  # before the sampler watched a job's ranks
    # What a page about the job needs, typed.
    assert report.config.target == Target("script", "examples/skipped_collective.py")
    assert (record.culprit.ranks, record.culprit.kind, record.culprit.collective.seq) == ([1], "behind", 20)
    assert record.culprit.analyzer.status == "not run" and record.culprit.evidence
    ranks = {r.rank: r for r in record.ranks}
    assert (ranks[0].exit_code, ranks[0].error.type, ranks[1].stopped_by_launcher) == (1, "RuntimeError", True)
    assert ranks[0].last_status.progress["0"].enqueued == 20 and record.stacks == {0: ranks[0].stacks}
    assert record.left_running == [] and record.nothing_left_running
    assert [(c.check, c.verdict) for c in record.checks()] == [
        ("job succeeded", Verdict.FAIL), ("nothing left running", Verdict.PASS)]
    assert report.verdict == Verdict.FAIL and record.run_ids() == [record.run_id]
    assert launch_command.parse(report.config.to_argv()) == report.config


def test_a_job_passes_only_when_it_succeeded_and_left_nothing_running():
    record = report_from_json(json.loads(LAUNCH_REPORT.read_text())).results
    fields = {f: getattr(record, f) for f in ("job_dir", "run_id", "duration_s", "detected_at", "detected_by",
                                              "hang", "torchrun_root_cause_rank", "ranks", "launcher_error")}
    from ddplab.records.launch import LeftProcess

    ok = LaunchRecord(outcome="succeeded", culprit=None, left_running=[], **fields)
    leak = LaunchRecord(outcome="succeeded", culprit=None, left_running=[LeftProcess(5, "python x.py")], **fields)
    assert Verdict.worst(c.verdict for c in ok.checks()) == Verdict.PASS
    assert Verdict.worst(c.verdict for c in leak.checks()) == Verdict.FAIL and not leak.nothing_left_running


def test_the_libraries_of_launch_env_and_clean_read_no_command_line():
    """Issue 11: no module below the commands parses arguments; torchrun's parser is commands/launch.py's."""
    import ddplab

    src = Path(ddplab.__file__).parent
    for path in [*sorted((src / "job").glob("*.py")), src / "measurements" / "env.py",
                 src / "supervision" / "procs.py"]:
        text = path.read_text()
        assert not any(word in text for word in ("argparse", "get_args_parser", "parse_args")), path.name


def test_the_orphans_listing_says_program_age_and_reason_on_its_lines():
    from rich.console import Console

    console = Console(record=True, width=200, highlight=False)
    report = Report(command="clean", config=CleanConfig(), platform=None, results=_clean(), verdict=Verdict.WARN)
    clean_command.render(report, console)
    text = console.export_text()
    assert "4242 │ python worker.py: age 3s, device mem n/a; its launcher is gone" in text, text
    assert "\\n" not in text, text  # no newline spelt out where a line was meant
