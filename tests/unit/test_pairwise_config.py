"""PairwiseConfig: validated on construction (machine pairs need a job on two machines or more), and its command
line (to_argv) parses back into an equal config through `ddplab pairwise`'s own parser."""

import argparse

import pytest

from ddplab.commands import pairwise as pairwise_cmd
from ddplab.records.config import LaunchOptions
from ddplab.measurements.pairwise import PairwiseConfig
from ddplab.measurements.sweep import DEFAULT_SIZES as SWEEP_DEFAULT_SIZES
from ddplab.errors import UsageError
from ddplab.basics.sizes import size_range

ACROSS = LaunchOptions(nproc=1, nnodes=3, rdzv_endpoint="node0:29400")


def parsed(argv: list[str]) -> PairwiseConfig:
    parser = argparse.ArgumentParser()
    pairwise_cmd.add_arguments(parser)
    return pairwise_cmd.config_from_args(parser.parse_args(argv))


CONFIGS = [
    PairwiseConfig(launch=ACROSS),
    PairwiseConfig(launch=LaunchOptions(nproc=2, nnodes=2, rdzv_endpoint="10.0.0.1:29400", timeout_s=30.0),
                   sizes=tuple(size_range("8", "1M", 32)), iters=3, warmup=0, repeat=1),
]


@pytest.mark.parametrize("config", CONFIGS, ids=range(len(CONFIGS)))
def test_the_command_line_of_a_config_gives_it_back(config):
    argv = config.to_argv()
    assert parsed(argv) == config, argv


def test_the_defaults_are_one_rank_per_machine_and_the_sweep_s_sizes():
    config = parsed(["--nnodes", "2", "--rdzv-endpoint", "node0:29400"])
    assert config.launch.nproc == 1 and config.sizes == SWEEP_DEFAULT_SIZES and config.repeat == 3
    # one rank is the command's own default: its command line leaves it out, as every other default
    assert config.to_argv() == ["--nnodes", "2", "--rdzv-endpoint", "node0:29400"]


def test_one_machine_is_refused_before_anything_starts():
    with pytest.raises(UsageError) as err:
        parsed([])
    assert err.value.reference == "pairwise-needs-machines" and err.value.exit_code == 2
    assert "--nnodes 1" in err.value.message and "--rdzv-endpoint" in err.value.message


@pytest.mark.parametrize("change, reference", [
    ({"iters": 0}, "invalid-iters"),
    ({"warmup": -1}, "invalid-warmup"),
    ({"repeat": 0}, "invalid-repeat"),
    ({"sizes": (8, 100, 3000)}, "invalid-sizes"),
])
def test_bad_values_are_usage_errors(change, reference):
    with pytest.raises(UsageError) as err:
        PairwiseConfig(launch=ACROSS, **change)
    assert err.value.reference == reference and err.value.exit_code == 2
