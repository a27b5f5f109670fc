"""`ddplab drill`'s Config: the launch options every command shares, a GLOBAL victim, --timeout as the hang
timeout too, and a command line (to_argv) that the command's own parser turns back into the same Config."""

import argparse
from dataclasses import replace

import pytest

from ddplab.commands import drill as drill_command
from ddplab.records.config import LaunchOptions
from ddplab.measurements.drill import DrillConfig
from ddplab.errors import UsageError
from ddplab.records.codec import from_json, to_json


def parsed(argv: list[str]) -> DrillConfig:
    parser = argparse.ArgumentParser()
    drill_command.add_arguments(parser)
    return drill_command.config_from_args(parser.parse_args(argv))


@pytest.mark.parametrize("config", [
    DrillConfig(drills=("kill_rank",)),
    DrillConfig(launch=LaunchOptions(nproc=3, placement="shared", backend="gloo", device="cpu", timeout_s=6.0,
                                     run_dir="runs/d", sharing_daemon="off", memory_fraction=0.2),
                drills=("stall", "oom"), victim=0),
    DrillConfig(launch=LaunchOptions(nproc=1, nnodes=2, rdzv_endpoint="127.0.0.1:29400", timeout_s=8.0,
                                     hang_timeout_s=3.0), drills=("late_rank",), launcher="torchrun"),
])
def test_to_argv_parses_back_to_the_same_config(config):
    assert parsed(config.to_argv()) == config
    assert from_json(DrillConfig, to_json(config)) == config


def test_defaults_match_the_command_line_defaults():
    assert parsed(["kill-rank"]) == DrillConfig(drills=("kill_rank",))
    assert DrillConfig(drills=("kill_rank",)).launch.timeout_s == 10.0


def test_the_victim_defaults_to_the_last_global_rank_of_the_job():
    assert DrillConfig(drills=("stall",), launch=LaunchOptions(nproc=3)).victim == 2
    two_machines = LaunchOptions(nproc=2, nnodes=2, rdzv_endpoint="node0:29400")
    assert DrillConfig(drills=("stall",), launch=two_machines).victim == 3
    assert DrillConfig(drills=("stall",), launch=two_machines, victim=3).victim == 3  # not a rank of nproc 2 alone


def test_timeout_is_the_hang_timeout_unless_a_shorter_one_is_given():
    assert parsed(["stall", "--timeout", "7"]).launch.hang_timeout_s == 7.0
    assert parsed(["stall", "--timeout", "7", "--hang-timeout", "3"]).launch.hang_timeout_s == 3.0
    assert parsed(["stall", "--timeout", "7", "--hang-timeout", "600"]).launch.hang_timeout_s == 7.0  # the lab's


@pytest.mark.parametrize("argv, reference, fragment", [
    (["stall", "--nproc", "1"], "drill-needs-ranks", "--nproc 1: a drill needs at least 2 ranks"),
    (["stall", "--victim", "5"], "invalid-victim", "--victim 5 is not a rank of --nproc 2 (valid: 0 to 1)"),
    (["stall", "--nproc", "1", "--nnodes", "2", "--rdzv-endpoint", "h:1", "--victim", "2"], "invalid-victim",
     "--victim 2 is not a rank of --nproc 1 x --nnodes 2 (valid: 0 to 1)"),
    (["kill_launcher", "--launcher", "slurm"], "invalid-launcher", 'unknown launcher "slurm"'),
    (["kill-rnak"], "invalid-drill", 'maybe you meant "kill_rank"'),
])
def test_bad_input_is_refused_before_anything_starts(argv, reference, fragment):
    with pytest.raises(UsageError) as err:
        parsed(argv)
    assert err.value.reference == reference and fragment in err.value.message


def test_a_job_across_machines_names_each_drill_session_the_same_on_every_machine():
    from ddplab.drills.runner import DrillContext

    across = DrillConfig(drills=("stall",), launch=LaunchOptions(nproc=2, nnodes=2, rdzv_endpoint="node0:29400"))
    ctx = DrillContext(across, "stall", platform=None, placement=None, observer=None)
    assert ctx.session_id("stall") == "drill-stall-stall"
    assert ctx.session_id("stall-blocking-wait") == "drill-stall-stall-blocking-wait"  # a new meeting each
    named = DrillConfig(drills=("stall",), launch=replace(across.launch, rdzv_id="job7"))
    assert DrillContext(named, "stall", None, None, None).session_id("stall") == "job7-stall-stall"
    one = DrillContext(DrillConfig(drills=("stall",)), "stall", None, None, None)
    assert one.session_id("stall") is None  # one machine: its own loopback store, nothing to tell apart


def test_rdzv_id_and_host_survive_the_command_line():
    launch = LaunchOptions(nproc=2, nnodes=2, rdzv_endpoint="node0:29400", rdzv_id="job7", rdzv_host="no",
                           timeout_s=10.0)
    config = DrillConfig(launch=launch, drills=("kill_node", "partition"))
    assert parsed(config.to_argv()) == config and from_json(DrillConfig, to_json(config)) == config


def test_drills_are_refused_under_torchrun():
    with pytest.raises(UsageError) as err:
        DrillConfig(launch=LaunchOptions(started_by="torchrun"), drills=("stall",))
    assert err.value.reference == "not-under-torchrun" and "once per machine" in err.value.message
