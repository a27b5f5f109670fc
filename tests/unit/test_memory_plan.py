"""Memory planning (platform/memory_plan.py) from injected machine numbers: what a size needs per rank on each route,
against what the machine and its cgroups have, for every rank of the machine; the launcher's check on hand-made
platforms; and the numbers read from cgroup v1/v2 files and a budget. Pure functions, no processes."""

from pathlib import Path

import pytest

from ddplab import collectives
from ddplab.platform import memory_plan
from ddplab.records.config import LaunchOptions
from ddplab.errors import UsageError
from ddplab.platform.memory_plan import Route, collective_need, judge, pinned_block, with_margin
from ddplab.platform import describe
from ddplab.job.policy import plan
from ddplab.records.memory import MachineMemory, MemoryNeed
from tests.unit import fakes

MiB, GiB = 1 << 20, 1 << 30
GLOO_ON_DEVICE = Route.of("gloo", host_only=False)
NCCL = Route.of("nccl", host_only=False)
HOST = Route.of("gloo", host_only=True)


def need(op: str, size: int, route: Route, in_place: bool = False, n: int = 2, in_flight: int = 20, elem: int = 4):
    spec = collectives.get(op)
    count = spec.count_for(size, n, elem)
    return collective_need(op, spec.buffers(count, n, in_place), elem, route, in_flight=in_flight)


def machine(host: int | None, device: int | None = None, cap: int | None = None) -> MachineMemory:
    return MachineMemory(host, "injected", device, cap)


# --- what a size needs ---------------------------------------------------------------------------------------

def test_gloo_on_device_tensors_stages_every_call_in_flight_through_pinned_host_memory():
    # The H200 failure: 2 gloo ranks on one GPU, a pipelined 1 GiB all_reduce keeps -n 20 calls in flight, each
    # with a pinned host copy of the buffer; through NCCL the same size needs no host memory at all.
    staged, direct = need("all_reduce", GiB, GLOO_ON_DEVICE), need("all_reduce", GiB, NCCL)
    assert staged.host_bytes == with_margin(20 * GiB)
    assert direct.host_bytes == 0 and staged.device_bytes == direct.device_bytes > GiB
    assert "20 call(s) in flight x 1.0 GiB of pinned host copies" in staged.method
    # blocking mode: one call at a time
    assert need("all_reduce", GiB, GLOO_ON_DEVICE, in_flight=1).host_bytes == with_margin(GiB)


def test_staging_copies_each_tensor_a_call_is_given_even_in_place_rounded_to_powers_of_two():
    # all_gather in place: the input is a view into the output, one allocation on the device, but gloo copies
    # the input (1/3 of 3 MiB = 1 MiB) and the output (3 MiB -> a 4 MiB pinned block) separately.
    staged = need("all_gather", 3 * MiB, GLOO_ON_DEVICE, in_place=True, n=3, in_flight=1)
    gloo_own = 3 * 3 * MiB  # gloo's flat copy of the output, below glibc's mapping threshold: in flight + 2
    assert staged.host_bytes == with_margin(1 * MiB + 4 * MiB + gloo_own)
    assert pinned_block(3 * MiB) == 4 * MiB and pinned_block(4 * MiB) == 4 * MiB and pinned_block(1) == 1


def test_on_the_host_the_buffers_and_check_data_are_host_memory_and_gloo_copies_what_it_gathers():
    reduce_host = need("all_reduce", 64 * MiB, HOST, in_flight=5)
    elems = 64 * MiB // 4
    assert reduce_host.device_bytes == 0
    assert reduce_host.host_bytes == with_margin(64 * MiB + elems * (4 + 3 * 4 + 1))  # no copy for all_reduce
    gather_host = need("all_gather", 64 * MiB, HOST, in_flight=5)
    # above 32 MiB gloo's copies are mapped and unmapped: its 2 worker threads hold 2 at most
    assert gather_host.host_bytes == with_margin(64 * MiB + 32 * MiB + elems * 17 + 2 * 64 * MiB)


def test_gloo_reduce_scatter_keeps_a_clone_of_the_input_per_call_in_flight_beside_the_tensors():
    # gloo all-reduces a clone of the whole input and holds it until the call is waited for (measured on CPU:
    # 20.1 x the size with 20 calls in flight): on the device for device tensors, on top of the pinned copies
    staged, direct = need("reduce_scatter", GiB, GLOO_ON_DEVICE), need("reduce_scatter", GiB, NCCL)
    buffers_and_check = GiB + 512 * MiB + 256 * MiB * 17  # input, output, 17 B per element of check data
    assert direct.device_bytes == with_margin(buffers_and_check)
    assert staged.device_bytes == with_margin(buffers_and_check + 20 * GiB)
    assert staged.host_bytes == with_margin(20 * (GiB + 512 * MiB))
    on_host = need("reduce_scatter", 64 * MiB, HOST)
    assert on_host.host_bytes == with_margin(64 * MiB + 32 * MiB + 16 * MiB * 17 + 20 * 64 * MiB)


# --- against the machine ---------------------------------------------------------------------------------------

def test_a_size_that_fits_on_host_and_device():
    fit = judge(need("all_reduce", 64 * MiB, GLOO_ON_DEVICE), machine(64 * GiB, 100 * GiB), 2, 2, host_only=False)
    assert fit.fits and fit.reason is None
    assert fit.host_needed_bytes == 2 * with_margin(20 * 64 * MiB)


def test_a_size_the_host_cannot_hold_says_needed_and_available_for_every_rank_of_the_machine():
    one = need("all_gather", GiB, GLOO_ON_DEVICE)  # (20 x (512 MiB + 1 GiB) + 2 x 1 GiB) + 60% = 51.2 GiB
    assert one.host_bytes == int(1.6 * 32 * GiB)
    fit = judge(one, machine(64 * GiB, 100 * GiB), 2, 2, host_only=False)
    assert not fit.fits and fit.host_needed_bytes == 2 * one.host_bytes and fit.host_available_bytes == 64 * GiB
    assert fit.reason == ("needs 102.4 GiB of host memory for 2 rank(s) on this machine (51.2 GiB each), 64.0 GiB "
                          "available (injected)")
    assert judge(one, machine(64 * GiB, 100 * GiB), 1, 1, host_only=False).fits  # one rank alone would fit


def test_a_size_the_device_cannot_hold_through_nccl():
    one = need("all_to_all", 4 * GiB, NCCL)  # (4 + 4 GiB + 17 B x 1 Gi elements of check data) + 60%: 40 GiB
    fit = judge(one, machine(500 * GiB, 60 * GiB), 2, 2, host_only=False)
    assert not fit.fits and fit.host_needed_bytes == 0
    assert fit.device_needed_bytes == 2 * one.device_bytes > 60 * GiB
    assert "of device memory for 2 rank(s) on the device" in fit.reason and "60.0 GiB free" in fit.reason
    # one rank per device: the device holds it
    assert judge(one, machine(500 * GiB, 60 * GiB), 2, 1, host_only=False).fits


def test_each_rank_is_held_to_its_allocator_cap():
    one = need("all_reduce", 4 * GiB, NCCL)
    fit = judge(one, machine(500 * GiB, 140 * GiB, cap=10 * GiB), 2, 2, host_only=False)
    assert not fit.fits and "left under the rank's allocator cap" in fit.reason


def test_numbers_nobody_could_read_are_not_judged():
    assert judge(need("all_gather", 64 * GiB, GLOO_ON_DEVICE), machine(None), 8, 8, host_only=False).fits


# --- the machine's numbers ---------------------------------------------------------------------------------------

def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_cgroup_v2_limit_smaller_than_memavailable_bounds_the_headroom(tmp_path):
    root = tmp_path / "cgroup"
    job = root / "user.slice" / "job.scope"
    write(job / "memory.max", f"{16 * GiB}\n")
    write(job / "memory.current", f"{10 * GiB}\n")
    write(job / "memory.stat", f"anon 1\ninactive_file {2 * GiB}\nactive_file 5\n")
    write(root / "user.slice" / "memory.max", "max\n")  # an ancestor without a limit
    write(root / "user.slice" / "memory.current", f"{40 * GiB}\n")
    write(tmp_path / "self-cgroup", "0::/user.slice/job.scope\n")
    numbers = memory_plan.read_machine(environ={}, host_memory=lambda: (512 * GiB, 400 * GiB),
                                       proc_self_cgroup=tmp_path / "self-cgroup", cgroup_root=root)
    # 16 - 10 + 2 (inactive page cache) = 8 GiB, less 5% of the 16 GiB limit
    assert numbers.host_available_bytes == 8 * GiB - int(0.05 * 16 * GiB)
    assert numbers.host_source.startswith(f"cgroup v2 {job} memory.max - memory.current")
    assert numbers.device_free_bytes is None  # no rank's device asked


def test_a_cgroup_v1_limit_is_read_and_no_limit_is_no_bound(tmp_path):
    mount = tmp_path / "cgroup" / "memory"
    write(mount / "memory.limit_in_bytes", f"{4 * GiB}\n")  # a container sees its own cgroup at the mount's root
    write(mount / "memory.usage_in_bytes", f"{1 * GiB}\n")
    write(tmp_path / "self-cgroup", "12:memory:/docker/abc\n11:cpu,cpuacct:/docker/abc\n")
    numbers = memory_plan.read_machine(environ={}, host_memory=lambda: (64 * GiB, 60 * GiB),
                                       proc_self_cgroup=tmp_path / "self-cgroup", cgroup_root=tmp_path / "cgroup")
    assert numbers.host_available_bytes == 3 * GiB - 256 * MiB  # the reserve's floor
    assert "v1" in numbers.host_source
    write(mount / "memory.limit_in_bytes", "9223372036854771712\n")
    numbers = memory_plan.read_machine(environ={}, host_memory=lambda: (64 * GiB, 60 * GiB),
                                       proc_self_cgroup=tmp_path / "self-cgroup", cgroup_root=tmp_path / "cgroup")
    assert numbers.host_available_bytes == 60 * GiB - int(0.05 * 64 * GiB)
    assert numbers.host_source.startswith("MemAvailable 60.0 GiB of 64.0 GiB")


def test_a_budget_below_the_machine_bounds_it_and_a_bad_one_is_refused(tmp_path):
    numbers = memory_plan.read_machine(environ={memory_plan.BUDGET_ENV: "300M"},
                                       host_memory=lambda: (64 * GiB, 60 * GiB), proc_self_cgroup=tmp_path / "none")
    assert numbers.host_available_bytes == 300 * MiB and numbers.host_source == "DDPLAB_HOST_MEMORY_BUDGET=300.0 MiB"
    with pytest.raises(UsageError) as err:
        memory_plan.read_machine(environ={memory_plan.BUDGET_ENV: "lots"}, host_memory=lambda: (1, 1))
    assert err.value.exit_code == 2 and "DDPLAB_HOST_MEMORY_BUDGET" in err.value.message


# --- before anything starts (single-size stages, a sweep's smallest size) ----------------------------------------

def test_the_launcher_refuses_what_the_host_cannot_hold_for_all_its_ranks():
    platform = describe(fakes.cpu_only())
    placement = plan(LaunchOptions(nproc=2), platform)
    ok = MemoryNeed(host_bytes=9 * GiB, device_bytes=0, method="per rank: x")
    assert memory_plan.require_fits(platform, placement, ok, "--bytes X", "too-large", "lower",
                                    machine(20 * GiB)).host_needed_bytes == 18 * GiB
    with pytest.raises(UsageError) as err:
        memory_plan.require_fits(platform, placement, MemoryNeed(11 * GiB, 0, "x"), "--bytes X", "too-large", "lower",
                                 machine(20 * GiB))
    assert err.value.reference == "too-large" and err.value.exit_code == 2
    assert err.value.message.startswith("--bytes X needs 22.0 GiB of host memory for 2 rank(s) on this machine")


def test_the_launcher_judges_each_device_with_its_ranks_and_the_host_with_all():
    platform = describe(fakes.nvidia())  # one device, 140 GiB free of 150 GiB
    shared = plan(LaunchOptions(nproc=2, placement="shared"), platform)  # cap 0.45 x 150 GiB = 67.5 GiB per rank
    fit = memory_plan.launcher_fit(platform, shared, MemoryNeed(GiB, 67 * GiB, "x"), machine(64 * GiB))
    assert not fit.fits and "134.0 GiB of device memory for 2 rank(s)" in fit.reason  # > 140 - 5% of 150
    capped = plan(LaunchOptions(nproc=2, placement="shared", memory_fraction=0.3), platform)  # 45 GiB per rank
    fit = memory_plan.launcher_fit(platform, capped, MemoryNeed(GiB, 50 * GiB, "x"), machine(64 * GiB))
    assert not fit.fits and "50.0 GiB of device memory per rank, 45.0 GiB left under the rank's allocator cap" \
        in fit.reason
    fit = memory_plan.launcher_fit(platform, shared, MemoryNeed(40 * GiB, 30 * GiB, "x"), machine(64 * GiB))
    assert not fit.fits and "80.0 GiB of host memory for 2 rank(s)" in fit.reason  # the host, for both ranks
    assert memory_plan.launcher_fit(platform, shared, MemoryNeed(GiB, 30 * GiB, "x"), machine(64 * GiB)).fits


# --- between sizes: the caches handed back (platform/runtime.py), through a device module of our own ---------

class _Module:
    def __init__(self):
        self.calls = []

    def synchronize(self, index):
        self.calls.append("synchronize")

    def empty_cache(self):
        self.calls.append("device cache")


class _Accelerator:
    def __init__(self, calls):
        self.calls = calls

    def empty_host_cache(self):
        self.calls.append("host cache")


def _device_runtime(accelerator: bool, private: bool):
    import types

    from ddplab.platform import DeviceRuntime

    runtime = DeviceRuntime("cpu", 0)
    module = _Module()
    runtime.host_only, runtime.module = False, module
    c = types.SimpleNamespace(**({"_host_emptyCache": lambda: module.calls.append("private host cache")}
                                 if private else {}))
    runtime.torch = types.SimpleNamespace(_C=c, **({"accelerator": _Accelerator(module.calls)} if accelerator else {}))
    return runtime, module.calls


def test_a_staging_route_empties_the_pinned_host_cache_as_well_as_the_device_cache():
    runtime, calls = _device_runtime(accelerator=True, private=True)
    assert memory_plan.release(runtime, staged=True) is True
    assert calls == ["synchronize", "device cache", "host cache"]  # torch.accelerator's call first
    runtime, calls = _device_runtime(accelerator=False, private=True)  # torch 2.11: the private call
    assert runtime.release_caches(host=True) is True and calls[-1] == "private host cache"
    runtime, calls = _device_runtime(accelerator=True, private=True)
    assert memory_plan.release(runtime, staged=False) is False and calls == ["synchronize", "device cache"]
    runtime, calls = _device_runtime(accelerator=False, private=False)  # a torch with no way: said, not hidden
    assert runtime.release_caches(host=True) is False


def test_peak_rss_is_reset_per_size_and_falls_back_where_the_reset_is_refused(tmp_path):
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmHWM:\t  900000 kB\nVmRSS:\t  300000 kB\n")
    rss = memory_plan.PeakRss(status, tmp_path / "clear_refs")
    assert rss.reset() == 300000 * 1024 and (tmp_path / "clear_refs").read_text() == "5"
    assert rss.peak() == 900000 * 1024
    refused = memory_plan.PeakRss(status, tmp_path / "no" / "clear_refs")
    refused.reset()
    assert not refused.resettable and refused.peak() == 300000 * 1024  # the RSS read, not a stale peak
    assert memory_plan.PeakRss(tmp_path / "missing").peak() is None
