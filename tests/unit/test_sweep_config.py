"""SweepConfig: validated on construction, and its command line (to_argv) parses back into an equal config,
-b/-e/-f included (sizes.range_args derives them from the sizes the config keeps)."""

import argparse
import random

import pytest

from ddplab.commands import sweep as sweep_cmd
from ddplab.records.config import LaunchOptions
from ddplab.measurements.sweep import DEFAULT_SIZES as SWEEP_DEFAULT_SIZES, SweepConfig
from ddplab.errors import UsageError
from ddplab.basics.sizes import range_args, size_range


def parsed(argv: list[str]) -> SweepConfig:
    parser = argparse.ArgumentParser()
    sweep_cmd.add_arguments(parser)
    return sweep_cmd.config_from_args(parser.parse_args(argv))


CONFIGS = [
    SweepConfig(),
    SweepConfig(launch=LaunchOptions(nproc=3, placement="spread", hang_timeout_s=12.5, timeout_s=30.0),
                ops=("all_gather", "reduce_scatter"), sizes=tuple(size_range("12", "12K", 32)), mode="blocking",
                iters=2, warmup=0, check=False, repeat=3, min_busbw=123.456789, sample=False,
                sample_while_timing=True),
    SweepConfig(ops=("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "send_recv"),
                sizes=tuple(size_range("8", "1G", 1.3)), dtype="bfloat16"),
    SweepConfig(sizes=(4096,), launch=LaunchOptions(nnodes=2, rdzv_endpoint="node0:29400", memory_fraction=0.3)),
    SweepConfig(sizes=tuple(size_range("1", "100", 1.1))),  # steps of one byte, then geometric
]


@pytest.mark.parametrize("config", CONFIGS, ids=range(len(CONFIGS)))
def test_the_command_line_of_a_config_gives_it_back(config):
    argv = config.to_argv()
    assert parsed(argv) == config, argv


def test_the_default_config_is_the_default_command_line():
    assert SweepConfig().to_argv() == [] and parsed([]) == SweepConfig()
    assert SWEEP_DEFAULT_SIZES == tuple(size_range("8", "64M", 2))


def test_sizes_are_spelt_as_the_user_would():
    argv = parsed(["-b", "64K", "-e", "1G", "-f", "4"]).to_argv()
    assert argv == ["-b", "64K", "-e", "1G", "-f", "4"]


def test_range_args_rebuild_any_range_size_range_makes():
    rng = random.Random(11)
    for _ in range(2000):
        begin = rng.randint(1, 5000)
        end = begin * rng.randint(1, 10**6)
        factor = round(rng.uniform(1.001, 20), rng.randint(0, 8))
        if factor <= 1:
            continue
        sizes = size_range(str(begin), str(end), factor)
        assert size_range(*range_args(sizes)) == sizes, (begin, end, factor)


@pytest.mark.parametrize("sizes", [(), (8, 100, 3000), (8, 8), (16, 8), (0, 8)])
def test_sizes_no_range_makes_are_refused(sizes):
    with pytest.raises(UsageError) as err:
        SweepConfig(sizes=sizes)
    assert err.value.exit_code == 2 and err.value.reference in ("invalid-sizes", "invalid-size")


@pytest.mark.parametrize("change, reference", [
    ({"ops": ("allreduce",)}, "invalid-collective"),
    ({"ops": ()}, "invalid-collective"),
    ({"dtype": "fp64"}, "invalid-dtype"),
    ({"mode": "graph"}, "invalid-mode"),
    ({"iters": 0}, "invalid-iters"),
    ({"warmup": -1}, "invalid-warmup"),
    ({"repeat": 0}, "invalid-repeat"),
    ({"min_busbw": float("inf")}, "invalid-min-busbw"),
])
def test_bad_values_are_usage_errors(change, reference):
    with pytest.raises(UsageError) as err:
        SweepConfig(**change)
    assert err.value.reference == reference and err.value.exit_code == 2
