"""The memory check every command makes before launching, on hand-made platforms: the
host (all ranks share its available memory) and NVIDIA devices (free memory per device,
each rank's allocator cap on a shared device)."""

import pytest

from ddplab.records.config import LaunchOptions
from ddplab.errors import UsageError
from ddplab.platform import describe
from ddplab.job.policy import plan, require_fits
from tests.unit import fakes

GiB = 1 << 30


def _fits(probe, bytes_per_rank, **opts):
    platform = describe(probe)
    require_fits(platform, plan(LaunchOptions(**opts), platform), bytes_per_rank, "--bytes X", "too-large", "lower")


def test_host_ranks_share_the_available_memory():
    _fits(fakes.cpu_only(), 10 * GiB, nproc=2)  # 20 GiB available
    with pytest.raises(UsageError) as err:
        _fits(fakes.cpu_only(), 11 * GiB, nproc=2)
    assert err.value.reference == "too-large" and err.value.exit_code == 2
    assert "needs about 22.0 GiB in host memory (2 rank(s) x 11.0 GiB), but only 20.0 GiB is free" in err.value.message


def test_ranks_on_one_device_share_its_free_memory():
    with pytest.raises(UsageError) as err:  # 140 GiB free of 150 GiB
        _fits(fakes.nvidia(), 71 * GiB, nproc=2, placement="shared", memory_fraction=0.5)
    assert "on device 0 (cuda device) (2 rank(s) x 71.0 GiB), but only 140.0 GiB is free" in err.value.message


def test_each_rank_on_a_shared_device_is_held_to_its_cap():
    with pytest.raises(UsageError) as err:  # default cap 0.45 x 150 GiB = 67.5 GiB
        _fits(fakes.nvidia(), 68 * GiB, nproc=2)
    assert "more than each rank's cap on device 0 (cuda device): 67.5 GiB (0.45 of 150.0 GiB)" in err.value.message
    _fits(fakes.nvidia(), 67 * GiB, nproc=2)


def test_one_rank_per_device_has_the_whole_device():
    _fits(fakes.nvidia(2), 139 * GiB, nproc=2, placement="per-device")
    with pytest.raises(UsageError):
        _fits(fakes.nvidia(2), 141 * GiB, nproc=2, placement="per-device")


def test_memory_nobody_could_read_is_not_judged():
    _fits(fakes.probe("cuda", 1, backends={"nccl": True}, devices=()), 10**15, nproc=1)
