"""The full profile on one device where the ranks would share it through gloo (NCCL before 2.30): the sweep stops
at profiles.HOST_STAGED_MAX, and on one device there is no second, shared-device sweep (the sweep is one)."""

from pathlib import Path

from ddplab.lab import profiles
from ddplab.platform import describe
from ddplab.basics.sizes import human_bytes
from ddplab.basics.sizes import parse_size, size_range
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


# The host CPU (no accelerator): gloo carries every byte through host memory, so the full profile's sweeps stop at
# HOST_STAGED_MAX, or lower where the memory plan says this machine's ranks could not hold a size; decided from the
# plan before anything runs, and said before the stages start.

def _host(available: int | None) -> profiles.Machine:
    from ddplab.records.memory import MachineMemory

    return profiles.Machine("cpu", 1, True, False, host_memory=None if available is None else MachineMemory(
        available, "MemAvailable (a test's number)"))


def _host_stages(machine) -> dict:
    return {s.name: s for s in profiles.stages("full", 2, machine, Path("/nowhere"), 60.0)}


def test_the_full_profile_on_a_roomy_host_sweeps_to_64_mib_and_says_why():
    stages = _host_stages(_host(16 << 30))
    assert max(stages["sweep"].config.sizes) == 64 << 20 and "-e 1G" not in stages["sweep"].command_line
    assert max(stages["sweep-engines"].config.sizes) <= 64 << 20
    note = profiles.host_note("full", _host(16 << 30), 2)
    assert "stop at 64.0 MiB, not 1.0 GiB" in note and "gloo carries every byte through host memory" in note
    assert "the memory plan fits every collective up to it (16.0 GiB available)" in note


def test_the_memory_plan_bounds_the_sweep_below_64_mib_on_a_small_host():
    """2 GiB free: the plan's largest size for every collective of 2 gloo ranks (reduce_scatter keeps a copy per call
    in flight, 20 in pipelined mode), the next one named with what it would need."""
    from ddplab.measurements.sweep import host_sizes_that_fit

    machine = _host(2 << 30)
    top = max(_host_stages(machine)["sweep"].config.sizes)
    assert top < 64 << 20
    bound = host_sizes_that_fit(_host_stages(_host(16 << 30))["sweep"].config, machine.host_memory)
    assert max(bound.sizes) == top and bound.refused == 2 * top and not bound.fit.fits
    assert bound.fit.host_needed_bytes > 2 << 30  # the refused size would need more than the machine has
    note = profiles.host_note("full", machine, 2)
    assert f"stop at {human_bytes(top)}" in note and f"the memory plan: {human_bytes(2 * top)} needs " in note


def test_a_host_whose_memory_cannot_be_read_keeps_the_64_mib_cap():
    assert max(_host_stages(_host(None))["sweep"].config.sizes) == 64 << 20
    assert "could not be read" in profiles.host_note("full", _host(None), 2)


def test_no_note_for_the_quick_profile_or_an_accelerator():
    assert profiles.host_note("quick", _host(16 << 30), 2) is None
    assert profiles.host_note("full", profiles.Machine("cuda", 1, False, True), 2) is None
