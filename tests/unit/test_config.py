"""Pure validation of user input: each bad value is refused with its value and the valid range."""

import pytest

from ddplab.config import LaunchOptions, TrainConfig
from ddplab.errors import UsageError


@pytest.mark.parametrize("kwargs, reference, fragment", [
    ({"nproc": 0}, "invalid-nproc", "--nproc 0"),
    ({"nproc": 100000}, "invalid-nproc", "1 to 64"),
    ({"memory_fraction": 0.0}, "invalid-memory-fraction", "0 < fraction <= 1"),
    ({"memory_fraction": 1.5}, "invalid-memory-fraction", "1.5"),
    ({"backend": "ncll"}, "invalid-backend", 'maybe you meant "nccl"'),
    ({"device": "gpu"}, "invalid-device", "cuda"),
    ({"reserve": 1.0}, "invalid-reserve", "0 <= reserve < 1"),
    ({"timeout_s": 0}, "invalid-timeout", "positive"),
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
])
def test_train_config_refuses_bad_values(kwargs, reference):
    with pytest.raises(UsageError) as err:
        TrainConfig(launch=LaunchOptions(), **kwargs)
    assert err.value.reference == reference
