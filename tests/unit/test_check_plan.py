"""`ddplab check`'s stages: the lab's measurements with sizes for the machine, pairwise only across machines, and
every stage's command line parsed back by its own command (as the lab's profiles are)."""

import argparse
from pathlib import Path

import pytest

from ddplab import commands
from ddplab.check import plan
from ddplab.check.config import CheckConfig
from ddplab.errors import UsageError
from ddplab.lab.profiles import Machine

HOST = Machine("cpu", 1, True, False)
ONE_GPU = Machine("cuda", 1, False, True)
EIGHT_GPUS = Machine("cuda", 8, False, True)


@pytest.mark.parametrize("machine, largest, nproc, placement", [
    (HOST, 512 << 10, 2, "auto"), (ONE_GPU, 8 << 20, 2, "auto"), (EIGHT_GPUS, 256 << 20, 8, "per-device")])
def test_the_sweep_covers_four_collectives_at_sizes_for_the_machine(machine, largest, nproc, placement):
    stages = {s.name: s for s in plan.stages(machine, 2, Path("/tmp/c"), 60.0)}
    assert list(stages) == ["storm", "sweep", "ceiling", "drill"]
    sweep = stages["sweep"].config
    assert sweep.ops == ("all_reduce", "all_gather", "reduce_scatter", "all_to_all") and sweep.check
    assert max(sweep.sizes) == largest and len(sweep.sizes) <= 6
    assert (sweep.launch.nproc, sweep.launch.placement) == (nproc, placement)
    assert sweep.launch.hang_timeout_s == 60.0 and sweep.launch.run_dir == "/tmp/c/sweep"
    assert stages["drill"].config.drills == ("kill_rank",)


def test_pairwise_runs_first_and_only_across_machines():
    config = CheckConfig(nnodes=2, rdzv_endpoint="10.0.0.1:29400")
    stages = plan.stages(EIGHT_GPUS, 2, Path("/tmp/c"), 60.0, config.across())
    assert [s.name for s in stages] == ["pairwise", "storm", "sweep", "ceiling", "drill"]
    launch = stages[0].config.launch
    assert (launch.nproc, launch.nnodes, launch.rdzv_endpoint) == (1, 2, "10.0.0.1:29400")
    assert CheckConfig().across() is None
    with pytest.raises(UsageError):
        CheckConfig(nnodes=2)  # without an endpoint


@pytest.mark.parametrize("machine", [HOST, ONE_GPU, EIGHT_GPUS])
def test_each_stage_command_line_parses_back_to_its_config(machine):
    for stage in plan.stages(machine, 2, Path("/tmp/c"), 60.0):
        parser = argparse.ArgumentParser()
        module = commands.load(stage.measurement)
        module.add_arguments(parser)
        args = parser.parse_args(stage.argv)
        assert module.config_from_args(args) == stage.config, stage.command_line
