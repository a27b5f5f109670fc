"""The full profile on one device where the ranks would share it through gloo (NCCL before 2.30): the sweep stops
at profiles.HOST_STAGED_MAX, and on one device there is no second, shared-device sweep (the sweep is one)."""

from pathlib import Path

from ddplab import profiles
from ddplab.platform import describe
from ddplab.sizes import parse_size, size_range
from tests.unit import fakes


def _stages(probe) -> dict:
    machine = profiles.Machine.of(describe(probe), "auto")
    return machine, {s.name: s for s in profiles.stages("full", 2, machine, Path("/nowhere"), 60.0)}


def test_one_gpu_with_an_nccl_that_refuses_shared_ranks_sweeps_through_gloo_to_64_mib():
    machine, stages = _stages(fakes.nvidia(1, loaded="2.28.9"))
    assert machine.shares_through_host
    assert max(stages["sweep"].config.sizes) == parse_size(profiles.HOST_STAGED_MAX) == 64 << 20
    assert "-e 1G" not in stages["sweep"].command_line and "sweep-shared" not in stages


def test_one_gpu_with_an_nccl_that_shares_it_sweeps_to_1_gib():
    machine, stages = _stages(fakes.nvidia(1, loaded="2.30.7", built="2.30.7", mps_control=True))
    assert not machine.shares_through_host
    assert max(stages["sweep"].config.sizes) == 1 << 30 and "sweep-shared" not in stages


def test_two_gpus_sweep_one_rank_per_device_to_1_gib_and_the_shared_sweep_stays():
    machine, stages = _stages(fakes.nvidia(2, loaded="2.28.9"))
    assert machine.shares_through_host  # only the shared stage shares, up to 256 MiB as before
    assert max(stages["sweep"].config.sizes) == 1 << 30
    assert stages["sweep-shared"].config.sizes == tuple(size_range("8", "256M", 4.0))


def test_the_host_cpu_shares_nothing_through_host_memory():
    assert not profiles.Machine.of(describe(fakes.cpu_only()), "auto").shares_through_host
    assert not profiles.Machine.of(None, "auto").shares_through_host
