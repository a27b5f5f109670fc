"""Pure validation of user input: each bad value is refused with its value and the valid range."""

import pytest

from ddplab.records.config import LaunchOptions
from ddplab.measurements.train import TrainConfig
from ddplab.errors import UsageError


@pytest.mark.parametrize("kwargs, reference, fragment", [
    ({"nproc": 0}, "invalid-nproc", "--nproc 0"),
    ({"nproc": 100000}, "invalid-nproc", "1 to 64"),
    ({"memory_fraction": 0.0}, "invalid-memory-fraction", "0 < fraction <= 1"),
    ({"memory_fraction": 1.5}, "invalid-memory-fraction", "1.5"),
    ({"reserve": 1.0}, "invalid-reserve", "0 <= reserve < 1"),
    ({"timeout_s": 0}, "invalid-timeout", "0 < seconds <= 86400"),
    ({"timeout_s": float("inf")}, "invalid-timeout", "--timeout inf is not a finite number"),
    ({"timeout_s": 1e15}, "invalid-timeout", "--timeout 1000000000000000.0 is out of range"),
    ({"timeout_s": float("nan")}, "invalid-timeout", "--timeout nan is not a finite number"),
    ({"hang_timeout_s": float("inf")}, "invalid-hang-timeout", "--hang-timeout inf is not a finite number"),
    ({"memory_fraction": float("nan")}, "invalid-memory-fraction", "--memory-fraction nan is not a finite number"),
    ({"reserve": float("nan")}, "invalid-reserve", "--reserve nan is not a finite number"),
    ({"nproc": 2.0}, "invalid-nproc", "--nproc 2.0 is not a whole number"),
    ({"rdzv_host": "true"}, "invalid-rdzv-host", 'unknown rdzv_host "true"; valid choices: auto, yes, no'),
])
def test_launch_options_refuse_bad_values(kwargs, reference, fragment):
    with pytest.raises(UsageError) as err:
        LaunchOptions(**kwargs)
    assert err.value.reference == reference
    assert fragment in err.value.message
    assert err.value.exit_code == 2


@pytest.mark.parametrize("kwargs, reference", [
    ({"steps": 0}, "invalid-steps"),
    ({"model": "resnet"}, "invalid-model"),
    ({"batch_size": 0}, "invalid-batch-size"),
    ({"batch_size": 100_000_000}, "invalid-batch-size"),
    ({"seed": -1}, "invalid-seed"),
    ({"seed": 2**64}, "invalid-seed"),
    ({"check_every": 10**9}, "invalid-check-every"),
])
def test_train_config_refuses_bad_values(kwargs, reference):
    with pytest.raises(UsageError) as err:
        TrainConfig(launch=LaunchOptions(), **kwargs)
    assert err.value.reference == reference


@pytest.mark.parametrize("argv, reference, fragment", [
    (["--backend", "ncll"], "invalid-backend", 'maybe you meant "nccl"'),
    (["--device", "gpu"], "invalid-device", "cuda"),
])
def test_the_vendor_tables_names_are_checked_by_the_command_line(argv, reference, fragment):
    """Device types and backends are the vendor table's, which records/config.py does not import (the records' layer):
    the command line checks them with the same message (cli_options.Vocabulary)."""
    with pytest.raises(UsageError) as err:
        _train(argv)
    assert err.value.reference == reference and fragment in err.value.message and err.value.exit_code == 2


def _train(argv):
    import argparse

    from ddplab.commands import train

    parser = argparse.ArgumentParser()
    train.add_arguments(parser)
    return train.config_from_args(parser.parse_args(argv))


def test_rdzv_host_travels_from_the_command_line_to_the_launchs_rendezvous():
    from ddplab.cluster.exposure import Rendezvous

    opts = _train(["--nnodes", "2", "--rdzv-endpoint", "10.9.0.1:29400", "--rdzv-host", "no"]).launch
    assert Rendezvous.from_options(opts) == Rendezvous(nnodes=2, endpoint="10.9.0.1:29400", host="no")
    assert Rendezvous.from_options(_train([]).launch) == Rendezvous()
