"""--engine torch|library|both for storm and sweep (issue 14), without processes: the option and its command line,
the refusals before anything starts (exit 3, with the install hint where the binding is missing), the records of
each engine (same rows as torch's, the added cost of both), their checks, figures, terminal, `compare` across
engines, `env`'s binding line and key, and the full profile's engine stages."""

from __future__ import annotations

import argparse
import dataclasses
import io
import json

import pytest
from rich.console import Console

from ddplab.reading import comparison
from ddplab.platform import library_engine
from ddplab.records import library_engine as engine_rows
from ddplab import measurements
from ddplab.lab import profiles
from ddplab.cli import main
from ddplab.commands import storm as storm_cmd
from ddplab.commands import sweep as sweep_cmd
from ddplab.records.config import LaunchOptions
from ddplab.measurements.storm import StormConfig
from ddplab.measurements.sweep import SweepConfig
from ddplab.errors import EnvironmentUnsupported, UsageError
from ddplab.measurements import storm, sweep
from ddplab.platform import describe
from ddplab.platform import library_binding as lb
from ddplab.job.policy import plan
from ddplab.records import Verdict
from ddplab.records.codec import from_json, to_json
from ddplab.records.library_engine import BindingStatus, LibraryEngineRecord
from ddplab.records.session import Distribution, Histogram
from ddplab.records.storm import StormRankResult, StormRecord
from ddplab.records.sweep import Repetition, SweepRankResult, SweepRankRow, SweepRecord, SweepSettings
from ddplab.reading.catalog import report_from_json
from tests.unit import fakes
from tests.unit.fake_sessions import session_record
from tests.unit.sweep_records import session_record as sweep_session

FAKE = "tests.library_fake:GlooBinding"
NCCL4PY_HINT = "pip install 'ddplab[nccl]'"


def _parsed(command, argv):
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    return command.config_from_args(parser.parse_args(argv))


# --- the option ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("engine", ["library", "both"])
@pytest.mark.parametrize("command, config_class", [(storm_cmd, StormConfig), (sweep_cmd, SweepConfig)])
def test_the_engine_travels_through_the_command_line_and_back(command, config_class, engine):
    config = _parsed(command, ["--engine", engine])
    assert config.engine == engine and config == config_class(engine=engine)
    assert config.to_argv()[-2:] == ["--engine", engine] and _parsed(command, config.to_argv()) == config
    assert to_json(config)["engine"] == engine and from_json(config_class, to_json(config)) == config


@pytest.mark.parametrize("config_class", [StormConfig, SweepConfig])
def test_torch_is_the_default_and_leaves_the_command_line_and_the_json_as_they_were(config_class):
    config = config_class()
    assert config.engine == "torch" and "--engine" not in config.to_argv()
    assert "engine" not in to_json(config)  # a torch report keeps its config keys (tests/golden)
    assert from_json(config_class, to_json(config)) == config


@pytest.mark.parametrize("config_class", [StormConfig, SweepConfig])
def test_an_unknown_engine_is_a_usage_error_naming_the_choices(config_class):
    with pytest.raises(UsageError) as err:
        config_class(engine="librar")
    assert err.value.exit_code == 2 and err.value.reference == "invalid-engine"
    assert '"librar"' in err.value.message and "torch, library, both" in err.value.message


def test_a_field_written_only_when_not_its_default_reads_back_either_way():
    @dataclasses.dataclass(frozen=True)
    class Row:
        size: int
        engine: str = dataclasses.field(default="torch", metadata={"omit_default": True})

    assert to_json(Row(8)) == {"size": 8} and to_json(Row(8, "library")) == {"size": 8, "engine": "library"}
    assert from_json(Row, {"size": 8}) == Row(8) and from_json(Row, {"size": 8, "engine": "both"}) == Row(8, "both")


# --- refused before anything starts ------------------------------------------------------------------------

def _placement(platform, **launch):
    return plan(LaunchOptions(**launch), platform)


def test_the_torch_engine_needs_no_binding():
    platform = describe(fakes.musa())
    assert library_engine.prepare_library("torch", platform, _placement(platform, nproc=1), environ={},
                                   import_module=lambda name: pytest.fail("torch imports no binding")) is None


@pytest.mark.parametrize("engine", ["library", "both"])
@pytest.mark.parametrize("probe", [fakes.musa(2), fakes.ascend(2), fakes.intel(2), fakes.cpu_only()])
def test_a_vendor_without_a_binding_says_so_with_exit_3(probe, engine):
    platform = describe(probe)
    with pytest.raises(EnvironmentUnsupported) as err:
        library_engine.prepare_library(engine, platform, _placement(platform, nproc=1), environ={})
    assert err.value.exit_code == 3 and err.value.reference == "no-library-binding"
    assert "no library binding known" in err.value.message


def test_a_missing_binding_is_exit_3_with_the_install_hint():
    platform = describe(fakes.nvidia(2))  # nccl4py is not installed on the test machine: the real import fails
    with pytest.raises(EnvironmentUnsupported) as err:
        library_engine.prepare_library("library", platform, _placement(platform, placement="per-device"), environ={})
    assert err.value.exit_code == 3 and err.value.reference == "library-binding-missing"
    assert "nccl4py is not installed" in err.value.message and NCCL4PY_HINT in err.value.hint


class _Unreachable:
    """A substitute that imports but cannot reach its library."""

    name = "unreachable"

    def versions(self):
        raise OSError("libnccl.so.2: cannot open shared object file")


def test_a_binding_that_cannot_reach_its_library_is_exit_3():
    platform = describe(fakes.nvidia(2))
    with pytest.raises(EnvironmentUnsupported) as err:
        library_engine.prepare_library("both", platform, _placement(platform, placement="per-device"),
                                environ={lb.SUBSTITUTE_ENV: f"{__name__}:_Unreachable"})
    assert err.value.exit_code == 3 and err.value.reference == "library-binding-unusable"
    assert "cannot reach its library" in err.value.message and "libnccl.so.2" in err.value.message


def test_several_ranks_on_one_device_follow_the_loaded_library():
    old = describe(fakes.nvidia(1, loaded="2.28.9"))
    with pytest.raises(EnvironmentUnsupported) as err:
        library_engine.prepare_library("library", old, _placement(old, placement="shared"),
                                       environ={lb.SUBSTITUTE_ENV: FAKE})
    assert err.value.exit_code == 3 and err.value.reference == "library-refuses-shared-device"
    new = describe(fakes.nvidia(1, loaded="2.30.7"))  # no sharing daemon here: the policy chose gloo for torch
    placement = _placement(new, placement="shared")
    assert placement.backend == "gloo" and "NCCL_MULTI_RANK_GPU_ENABLE" not in placement.env
    record = library_engine.prepare_library("library", new, placement, environ={lb.SUBSTITUTE_ENV: FAKE})
    assert record.env == {"NCCL_MULTI_RANK_GPU_ENABLE": "1"}  # the library engine still calls the library
    assert len(record.warnings) == 1 and "time-slice" in record.warnings[0] and "4,501.7 us" in record.warnings[0]
    with_daemon = describe(fakes.nvidia(1, loaded="2.30.7", mps_control=True))
    placement = _placement(with_daemon, placement="shared")
    assert placement.backend == "nccl" and placement.sharing_daemon == "private"
    record = library_engine.prepare_library("library", with_daemon, placement, environ={lb.SUBSTITUTE_ENV: FAKE})
    assert record.env == {} and record.warnings == []
    two = describe(fakes.nvidia(2, loaded="2.28.9"))
    assert library_engine.prepare_library("library", two, _placement(two, placement="per-device"),
                                   environ={lb.SUBSTITUTE_ENV: FAKE}).warnings == []


def test_a_library_engine_time_slicing_a_device_is_a_warning_row():
    sliced = dataclasses.replace(LIBRARY, warnings=["the library engine's ranks share a device without MPS"])
    record = dataclasses.replace(_storm_record("library", [_storm_rank(40.0, 60.0)]), library=sliced)
    rows = {c.check: c for c in storm.checks(record)}
    assert rows["library engine setup"].verdict == Verdict.WARN and "without MPS" in rows["library engine setup"].value
    assert "library engine setup" not in {c.check for c in storm.checks(_storm_record("library",
                                                                                      [_storm_rank(40.0, 60.0)]))}


def _cli(argv, monkeypatch, capsys, probe=None) -> tuple[int, str]:
    """`ddplab ARGV` in this process, on a machine described by ``probe`` (default: this one); starting ranks fails
    the test."""
    monkeypatch.delenv(lb.SUBSTITUTE_ENV, raising=False)
    monkeypatch.setattr("ddplab.job.session.run_workload", lambda *a, **k: pytest.fail("no rank may start"))
    if probe is not None:
        monkeypatch.setattr("ddplab.job.session.prepare", lambda opts, with_memory=False: (
            describe(probe), plan(opts, describe(probe))))
    code = main(argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("command", ["storm", "sweep"])
def test_the_commands_refuse_a_missing_binding_with_exit_3_and_the_install_hint(monkeypatch, capsys, command):
    code, err = _cli([command, "--engine", "library", "--per-device"], monkeypatch, capsys, fakes.nvidia(2))
    assert code == 3 and "error: library-binding-missing" in err and "nccl4py is not installed" in err
    assert NCCL4PY_HINT in err


@pytest.mark.parametrize("command", ["storm", "sweep"])
def test_the_commands_on_this_host_say_no_binding_is_known(monkeypatch, capsys, command):
    code, err = _cli([command, "--engine", "both"], monkeypatch, capsys)
    assert code == 3 and "error: no-library-binding" in err and "no library binding known for host CPU" in err


# --- the records ---------------------------------------------------------------------------------------------

STATUS = BindingStatus("gloo-fake", True, "gloo-fake test calls Gloo gloo", binding_version="test",
                       library_version="gloo", substitute=FAKE)
LIBRARY = LibraryEngineRecord(binding=STATUS, env={}, method=library_engine.METHOD)


def _storm_rank(mean_us: float, p50_us: float, correct: bool = True, library=None) -> StormRankResult:
    return StormRankResult(mean_us=mean_us, seed_method_us=mean_us, per_op_us=Distribution.of([p50_us] * 3),
                           per_op_histogram=Histogram([10.0], [0, 3]), device_us=None, cpu_user_s=0.1,
                           cpu_system_s=0.1, ctx_switches=3, storm_wall_s=1.0, correct=correct, library=library)


def _storm_record(engine: str, results) -> StormRecord:
    placement = _placement(describe(fakes.cpu_only()), nproc=2)
    return storm.summarise_storm(session_record(), placement, results, StormConfig(engine=engine),
                                 None if engine == "torch" else LIBRARY)


def test_a_storm_through_both_engines_reports_what_torch_adds_per_call():
    results = [_storm_rank(40.0, 60.0, library=_storm_rank(10.0, 20.0)),
               _storm_rank(44.0, 60.0, library=_storm_rank(12.0, 20.0))]
    record = _storm_record("both", results)
    assert record.summary.mean_us == 42.0 and record.library_summary.mean_us == 11.0 and record.library_correct
    assert [(c.timing, c.torch_us, c.library_us, c.added_us, c.share) for c in record.added_cost] == [
        ("pipelined mean", 42.0, 11.0, 31.0, 31.0 / 42.0), ("blocking per-op p50", 60.0, 20.0, 40.0, 40.0 / 60.0)]
    rows = {c.check: c for c in storm.checks(record)}
    assert rows["framework's added cost per call"].verdict == Verdict.INFO
    assert "torch adds +31.00 us (74 %)" in rows["framework's added cost per call"].value
    assert rows["library engine"].verdict == rows["library engine result correct"].verdict == Verdict.PASS
    assert measurements.verdict(storm, record) == Verdict.PASS
    assert [(t.op, t.time_us) for t in record.timed_rows(StormConfig())] == [("storm", 42.0), ("library:storm", 11.0)]
    assert "library engine 11.0 us, torch adds +31.0 us per call" in storm.summary(record)


def test_wrong_sums_through_the_library_fail_the_storm_even_when_torch_summed_right():
    record = _storm_record("both", [_storm_rank(40.0, 60.0, library=_storm_rank(10.0, 20.0, correct=False))])
    assert record.correct and record.library_correct is False
    assert {c.check: c.verdict for c in storm.checks(record)}["library engine result correct"] == Verdict.FAIL
    assert measurements.verdict(storm, record) == Verdict.FAIL


def test_a_library_storm_has_the_torch_storm_s_keys_and_is_judged_on_the_device_line():
    torch_doc = to_json(_storm_record("torch", [_storm_rank(40.0, 60.0)]))
    library = _storm_record("library", [_storm_rank(40.0, 60.0)])
    assert set(to_json(library)) == set(torch_doc) | {"engine", "library"}
    assert "engine" not in torch_doc and "library" not in torch_doc
    assert library.engine == "library" and library.summary.mean_us == 40.0
    device = describe(fakes.nvidia(1, loaded="2.30.7"))
    gloo_on_device = _placement(device, placement="shared")
    assert gloo_on_device.backend == "gloo"
    assert storm.threshold_for(gloo_on_device, None, "torch")[0] == storm.THRESHOLDS["gloo-on-device"][0]
    assert storm.threshold_for(gloo_on_device, None, "library")[0] == storm.THRESHOLDS["device"][0]
    assert storm.summary(library).startswith("library engine gloo-fake (process group gloo): mean 40.0 us")


def _rank_row(op: str, size: int, in_place: bool, time_us: float, wrong: int = 0) -> SweepRankRow:
    return SweepRankRow(op=op, size_bytes=size, count=size // 4, in_place=in_place,
                        repeats=[Repetition(time_us, (0.0, 1.0), 0.0)], num_wrong=wrong)


def _sweep_record(engine: str, torch_times, library_times=None, library_wrong: int = 0) -> SweepRecord:
    settings = SweepSettings(ops=("all_reduce",), sizes=(8, 64), dtype="float", mode="pipelined", iters=1, warmup=0,
                             check=True, repeat=1, engine=engine)

    def rows(times, wrong=0):
        return [_rank_row("all_reduce", 8, True, times[0], wrong), _rank_row("all_reduce", 64, True, times[1])]

    results = [SweepRankResult(rows=rows(torch_times), ceiling=None,
                               library_rows=rows(library_times, library_wrong) if library_times else None)] * 2
    return sweep.summarise(sweep_session(host_only=True), results, settings, None, [], host_only=True,
                           library=None if engine == "torch" else LIBRARY)


def test_a_sweep_through_both_engines_has_both_rows_and_the_added_cost_at_each_size():
    record = _sweep_record("both", (40.0, 50.0), (10.0, 45.0))
    assert [r.time_us for r in record.rows] == [40.0, 50.0]
    assert [r.time_us for r in record.library_rows] == [10.0, 45.0]
    assert [(c.size_bytes, c.added_us, c.share) for c in record.added_cost] == [(8, 30.0, 0.75), (64, 5.0, 0.1)]
    assert all(c.timing == "pipelined" for c in record.added_cost)
    checks = {c.check: c for c in sweep.checks(record)}
    assert checks["library engine results correct"].verdict == Verdict.PASS
    assert "all_reduce 8 B" in checks["framework's added cost per call"].value
    assert "all_reduce 64 B" in checks["framework's added cost per call"].value
    assert [(t.op, t.size_bytes, t.time_us) for t in record.timed_rows()] == [
        ("all_reduce", 8, 40.0), ("all_reduce", 64, 50.0), ("library:all_reduce", 8, 10.0),
        ("library:all_reduce", 64, 45.0)]
    back = report_from_json(json.loads(json.dumps(measurements.report(sweep, SweepConfig(engine="both"),
                                                                      record).to_json())))
    assert back.results == record and back.config.engine == "both"


def test_wrong_data_through_the_library_fails_the_sweep():
    record = _sweep_record("both", (40.0, 50.0), (10.0, 45.0), library_wrong=3)
    assert record.num_wrong_total == 0  # torch's rows were right
    assert {c.check: c.verdict for c in sweep.checks(record)}["library engine results correct"] == Verdict.FAIL
    assert measurements.verdict(sweep, record) == Verdict.FAIL


def test_a_library_sweep_writes_the_torch_sweep_s_rows_and_keys():
    torch_doc = to_json(_sweep_record("torch", (40.0, 50.0)))
    library_doc = to_json(_sweep_record("library", (10.0, 45.0)))
    assert set(library_doc) == set(torch_doc) | {"engine", "library"}
    assert [set(r) for r in library_doc["rows"]] == [set(r) for r in torch_doc["rows"]]
    assert [r["time_us"] for r in library_doc["rows"]] == [10.0, 45.0]


def test_compare_lines_up_a_library_sweep_with_a_torch_sweep_and_with_nccl_tests(tmp_path):
    paths = {}
    for engine, times in (("torch", (40.0, 50.0)), ("library", (10.0, 45.0))):
        report = measurements.report(sweep, SweepConfig(engine=engine), _sweep_record(engine, times))
        paths[engine] = tmp_path / f"{engine}.json"
        paths[engine].write_text(json.dumps(report.to_json()))
    old, new = comparison.load_input(str(paths["torch"])), comparison.load_input(str(paths["library"]))
    rows = comparison.line_up(old.rows, new.rows, 0.10, 0)
    assert [(r.op, r.size_bytes, r.old_time_us, r.new_time_us) for r in rows] == [
        ("all_reduce", 8, 40.0, 10.0), ("all_reduce", 64, 50.0, 45.0)]
    text = ("#  Collective test starting: all_reduce_perf\n"
            "           8             2     float     sum      -1    11.00    0.00    0.00      0    10.50    0.00"
            "    0.00      0\n")
    nccl = tmp_path / "nccl_tests.txt"
    nccl.write_text(text)
    lined = comparison.line_up(comparison.load_input(str(nccl)).rows, new.rows, 0.10, 0)
    assert [(r.op, r.size_bytes, r.old_time_us, r.new_time_us, r.regression) for r in lined] == [
        ("all_reduce", 8, 10.5, 10.0, False)]


def test_two_reports_of_both_engines_line_up_each_engine_with_its_own_kind():
    a, b = _sweep_record("both", (40.0, 50.0), (10.0, 45.0)), _sweep_record("both", (41.0, 50.0), (20.0, 45.0))
    rows = {(r.op, r.size_bytes): r for r in comparison.line_up(a.timed_rows(), b.timed_rows(), 0.10, 0)}
    assert rows[("library:all_reduce", 8)].regression and not rows[("all_reduce", 8)].regression


# --- figures and the terminal ----------------------------------------------------------------------------------

def test_both_engines_add_a_table_and_a_chart_to_the_html_report():
    from ddplab.report.page import render_html

    record = _sweep_record("both", (40.0, 50.0), (10.0, 45.0))
    figures = record.figures("sweep-engines")
    chart, table = [f for f in figures if f.id.startswith(("engines-", "added-cost-"))]
    assert {s.label for s in chart.series} == {"all_reduce in torch", "all_reduce in library"}
    assert table.rows[0] == ["all_reduce", "8", "in", "pipelined", "40.00", "10.00", "+30.00", "75.0 %"]
    page = render_html(measurements.report(sweep, SweepConfig(engine="both"), record))
    assert "added-cost-sweep" in page and "engines-sweep" in page and "+30.00" in page
    torch_only = _sweep_record("torch", (40.0, 50.0))
    assert [f.id for f in torch_only.figures("sweep")] == ["time-sweep-all_reduce", "busbw-sweep-all_reduce"]
    storm_figures = _storm_record("both", [_storm_rank(40.0, 60.0, library=_storm_rank(10.0, 20.0))]).figures("s")
    assert [f.id for f in storm_figures] == ["storm-hist-s", "added-cost-s"]  # one size: a table, no chart


def _screen(command, measurement, config, record) -> str:
    console = Console(width=300, record=True, highlight=False, file=io.StringIO())
    command.render(measurements.report(measurement, config, record), console)
    return console.export_text()


def test_the_terminal_shows_the_library_beside_torch_and_nothing_new_for_torch_alone():
    both = _screen(sweep_cmd, sweep, SweepConfig(engine="both"), _sweep_record("both", (40.0, 50.0), (10.0, 45.0)))
    assert "backend library engine gloo-fake, time: pipelined" in both and "What torch adds per call" in both
    assert "library engine: importable: gloo-fake test calls Gloo gloo" in both
    alone = _screen(sweep_cmd, sweep, SweepConfig(), _sweep_record("torch", (40.0, 50.0)))
    assert "library" not in alone and "backend gloo, time: pipelined" in alone
    storm_both = _screen(storm_cmd, storm, StormConfig(engine="both"),
                         _storm_record("both", [_storm_rank(40.0, 60.0, library=_storm_rank(10.0, 20.0))]))
    assert "library engine mean latency" in storm_both and "What torch adds per call" in storm_both
    assert "library" not in _screen(storm_cmd, storm, StormConfig(), _storm_record("torch", [_storm_rank(40.0, 60.0)]))


# --- env ------------------------------------------------------------------------------------------------------

def test_env_says_whether_the_binding_imports_as_a_line_and_a_key(monkeypatch):
    monkeypatch.delenv(lb.SUBSTITUTE_ENV, raising=False)
    doc, screen = fakes.env_screen(monkeypatch, fakes.nvidia(2))
    binding = doc["results"]["library_binding"]
    assert (binding["name"], binding["importable"]) == ("nccl4py", False)
    assert "nccl4py is not installed" in binding["reason"] and NCCL4PY_HINT in binding["hint"]
    assert "library binding" in screen and "nccl4py is not installed" in screen
    monkeypatch.setenv(lb.SUBSTITUTE_ENV, FAKE)
    doc, screen = fakes.env_screen(monkeypatch, fakes.nvidia(2))
    assert doc["results"]["library_binding"]["importable"] is True
    assert doc["results"]["library_binding"]["same_library_as_framework"] is None  # the fake names no file
    assert "importable: gloo-fake" in screen
    monkeypatch.delenv(lb.SUBSTITUTE_ENV)
    doc, _ = fakes.env_screen(monkeypatch, fakes.musa())
    assert doc["results"]["library_binding"]["name"] is None
    assert "no library binding known" in doc["results"]["library_binding"]["reason"]


def test_the_binding_line_says_whether_it_calls_the_copy_torch_binds():
    same = dataclasses.replace(STATUS, same_library_as_framework=True)
    other = dataclasses.replace(STATUS, same_library_as_framework=False)
    assert "the copy torch's calls bind to" in same.describe() and "NOT" not in same.describe()
    assert "NOT the copy torch's calls bind to" in other.describe()
    assert engine_rows.binding_check(LibraryEngineRecord(other, {}, "m")).verdict == Verdict.WARN
    assert engine_rows.binding_check(LibraryEngineRecord(same, {}, "m")).verdict == Verdict.PASS


# --- the lab ----------------------------------------------------------------------------------------------------

def _profile_stages(profile, machine):
    from pathlib import Path

    return {s.name: s for s in profiles.stages(profile, 2, machine, Path("/nowhere"), 60.0)}


@pytest.mark.parametrize("machine", [profiles.Machine("auto", 2, False, True),
                                     profiles.Machine("auto", 1, True, False)])
def test_the_full_profile_times_both_engines_and_their_command_lines_give_them_back(machine):
    stages = _profile_stages("full", machine)
    storm_stage, sweep_stage = stages["storm-engines"], stages["sweep-engines"]
    assert storm_stage.config.engine == sweep_stage.config.engine == "both"
    assert _parsed(storm_cmd, storm_stage.argv) == storm_stage.config
    assert _parsed(sweep_cmd, sweep_stage.argv) == sweep_stage.config
    assert "--engine both" in storm_stage.command_line
    assert not any(getattr(s.config, "engine", "torch") != "torch" for s in _profile_stages("quick", machine).values())


def test_an_engine_stage_where_no_binding_is_known_is_skipped_with_the_reason(monkeypatch, tmp_path):
    from ddplab.lab import run as lab
    from ddplab.records.run import StageRecord

    monkeypatch.delenv(lb.SUBSTITUTE_ENV, raising=False)
    monkeypatch.setattr("ddplab.job.session.run_workload", lambda *a, **k: pytest.fail("no rank may start"))
    stage = profiles.engine_stages(lambda name: LaunchOptions(run_dir=str(tmp_path / name)))[0]
    records: list[StageRecord] = []
    assert lab.run_stage(records, stage, Console(file=io.StringIO())) is None
    assert records[0].verdict == Verdict.SKIP and records[0].error == "no-library-binding"
    assert "no library binding known for host CPU" in records[0].summary
