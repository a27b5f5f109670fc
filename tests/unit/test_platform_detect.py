"""describe(): which device type and backend each vendor's facts lead to."""

import pytest

from ddplab.errors import EnvironmentUnsupported, UsageError
from ddplab.platform import describe
from tests.unit import fakes


@pytest.mark.parametrize("probe, device_type, backend, vendor, tool", [
    (fakes.nvidia(), "cuda", "nccl", "NVIDIA", "nvidia-smi"),
    (fakes.musa(), "musa", "mccl", "Moore Threads", "mthreads-gmi"),
    (fakes.ascend(), "npu", "hccl", "Huawei Ascend", "npu-smi"),
    (fakes.intel(), "xpu", "xccl", "Intel", "xpu-smi"),
    (fakes.cpu_only(), "cpu", "gloo", "host CPU", None),
])
def test_vendor_decides_device_backend_and_tool(probe, device_type, backend, vendor, tool):
    p = describe(probe)
    assert (p.device_type, p.backend, p.vendor, p.management_tool) == (device_type, backend, vendor, tool)
    assert p.backend_available is True


def test_musa_backend_comes_from_vendor_table_not_torch_map():
    # Stock torch cannot map "musa" (register_backend iterates the string's letters): docs/background.md §7.
    p = describe(fakes.musa())
    assert p.torch_default_backend is None
    assert p.backend == "mccl"
    assert p.plugin_module == "torch_musa" and p.plugin_version == "2.7.1"


def test_built_and_loaded_versions_are_both_reported():
    p = describe(fakes.nvidia(loaded="2.30.7", built="2.28.9"))
    assert p.collective_built_version == "2.28.9"
    assert p.collective_loaded_version == "2.30.7"
    assert p.collective_loaded_path.endswith("libnccl.so.2")


def test_accelerator_build_without_devices_falls_back_to_cpu():
    p = describe(fakes.probe("cuda", 0, backends={"nccl": True}))
    assert p.device_type == "cpu" and p.backend == "gloo" and p.device_count == 1


def test_host_counts_as_one_shared_device_with_host_memory():
    p = describe(fakes.cpu_only())
    assert p.device_count == 1
    assert p.devices[0].total_bytes == 24 * 2**30


def test_unknown_device_is_a_usage_error_naming_choices():
    with pytest.raises(UsageError) as err:
        describe(fakes.cpu_only(), "cdua")
    assert '"cdua"' in err.value.message and "cuda" in err.value.message and "maybe you meant" in err.value.message


def test_known_but_absent_device_is_an_environment_error():
    with pytest.raises(EnvironmentUnsupported) as err:
        describe(fakes.cpu_only(), "npu")
    assert err.value.exit_code == 3


def test_knobs_read_effective_values_from_environment():
    probe = fakes.nvidia()
    probe = type(probe)(**{**probe.__dict__, "environ": {"TORCH_NCCL_BLOCKING_WAIT": "1"}})
    knobs = {k.name: k for k in describe(probe).knobs}
    assert knobs["TORCH_NCCL_BLOCKING_WAIT"].effective == "1"
    assert knobs["TORCH_NCCL_BLOCKING_WAIT"].source == "environment"
    assert knobs["TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"].effective == "480"
    assert {k.name for k in describe(fakes.ascend()).knobs} >= {"HCCL_EXEC_TIMEOUT", "HCCL_CONNECT_TIMEOUT"}


def test_real_probe_of_this_machine_is_consistent():
    from ddplab.platform import detect

    p = detect()
    assert p.backend_available
    assert p.device_count >= 1
    assert p.backends_available["gloo"] is True


def test_detect_probes_the_machine_the_package_names(monkeypatch):
    """A fake machine put in the package's place is the one detect() describes, as for its other callers."""
    import ddplab.platform

    monkeypatch.setattr(ddplab.platform, "gather_probe", lambda with_memory=True: fakes.musa(2))
    platform = ddplab.platform.detect()
    assert (platform.device_type, platform.device_count) == ("musa", 2)
