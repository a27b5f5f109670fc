"""The shared-device policy: caps, sharing decision and backend choice, with reasons."""

import pytest

from ddplab.config import LaunchOptions
from ddplab.errors import EnvironmentUnsupported, UsageError
from ddplab.platform import describe
from ddplab.policy import plan
from tests.unit import fakes


def _plan(probe, **opts):
    return plan(LaunchOptions(**opts), describe(probe))


def test_default_cap_is_report_value_for_two_ranks():
    p = _plan(fakes.nvidia(), nproc=2)
    assert p.shared_device and p.device_indices == (0, 0)
    assert p.memory_fraction == pytest.approx(0.45)
    assert p.memory_fraction_enforced


def test_default_cap_for_four_ranks_keeps_reserve():
    assert _plan(fakes.nvidia(), nproc=4).memory_fraction == pytest.approx(0.225)


def test_caps_summing_above_one_are_refused_with_values():
    with pytest.raises(UsageError) as err:
        _plan(fakes.nvidia(), nproc=3, memory_fraction=0.4)
    assert err.value.reference == "memory-caps-exceed-device"
    assert "0.4" in err.value.message and "3 ranks" in err.value.message and "1.20" in err.value.message


def test_per_device_with_more_ranks_than_devices_is_refused():
    with pytest.raises(UsageError) as err:
        _plan(fakes.nvidia(count=2), nproc=3, placement="per-device")
    assert "--nproc 3" in err.value.message and "2 cuda device" in err.value.message


def test_auto_uses_one_rank_per_device_when_enough_devices():
    p = _plan(fakes.nvidia(count=2), nproc=2)
    assert not p.shared_device and p.device_indices == (0, 1) and p.backend == "nccl"
    assert p.memory_fraction is None


def test_old_nccl_shared_falls_back_to_gloo_and_says_why():
    p = _plan(fakes.nvidia(loaded="2.28.9"), nproc=2)
    assert p.backend == "gloo"
    assert "Duplicate GPU detected" in p.backend_reason and "2.28.9" in p.backend_reason
    assert "NCCL_MULTI_RANK_GPU_ENABLE=1" in p.backend_reason
    assert p.expected_failure is None


def test_new_nccl_shared_uses_nccl_with_variable_and_warns_without_mps():
    p = _plan(fakes.nvidia(loaded="2.30.7", built="2.28.9", mps=False), nproc=2)
    assert p.backend == "nccl"
    assert p.env == {"NCCL_MULTI_RANK_GPU_ENABLE": "1"}
    assert any("MPS" in w and "4,501 us" in w for w in p.warnings)


def test_new_nccl_with_mps_running_has_no_warning():
    p = _plan(fakes.nvidia(loaded="2.30.7", mps=True), nproc=2)
    assert p.backend == "nccl" and p.warnings == ()


def test_decision_uses_loaded_not_built_version():
    # torch says 2.30 was built in, but 2.28 is what the process loaded: NCCL will refuse.
    p = _plan(fakes.nvidia(loaded="2.28.9", built="2.30.7"), nproc=2)
    assert p.backend == "gloo"


def test_unknown_loaded_version_falls_back_to_built_and_says_so():
    p = _plan(fakes.nvidia(loaded=None, built="2.28.9"), nproc=2)
    assert p.backend == "gloo" and "loaded version unknown" in p.backend_reason


def test_forced_nccl_on_old_library_runs_and_expects_the_refusal():
    p = _plan(fakes.nvidia(loaded="2.28.9"), nproc=2, backend="nccl")
    assert p.backend == "nccl"
    assert "Duplicate GPU detected" in p.expected_failure
    assert p.warnings and "expected to fail" in p.warnings[0]


@pytest.mark.parametrize("probe, backend", [(fakes.musa(), "mccl"), (fakes.ascend(), "hccl"),
                                            (fakes.intel(), "xccl")])
def test_other_vendors_use_their_backend_and_report_unverified_sharing(probe, backend):
    p = _plan(probe, nproc=2)
    assert p.shared_device and p.backend == backend
    assert "not documented" in p.backend_reason
    assert p.warnings and "unverified" in p.warnings[0]
    assert p.memory_fraction == pytest.approx(0.45)


def test_cpu_shares_the_host_with_gloo_and_does_not_enforce_caps():
    p = _plan(fakes.cpu_only(), nproc=3)
    assert p.shared_device and p.backend == "gloo" and not p.memory_fraction_enforced


def test_requested_backend_not_available_here_is_environment_error_listing_available():
    with pytest.raises(EnvironmentUnsupported) as err:
        _plan(fakes.cpu_only(), nproc=2, backend="nccl")
    assert err.value.reference == "backend-unavailable" and err.value.exit_code == 3
    assert '"nccl"' in err.value.message and "available: gloo" in err.value.message


def test_vendor_backend_missing_is_environment_error():
    probe = fakes.probe("cuda", 1, backends={"nccl": False})
    with pytest.raises(EnvironmentUnsupported) as err:
        _plan(probe, nproc=1)
    assert err.value.reference == "backend-missing"


def test_explicit_gloo_on_shared_accelerator_is_honoured():
    p = _plan(fakes.nvidia(loaded="2.30.7"), nproc=2, backend="gloo")
    assert p.backend == "gloo" and "requested" in p.backend_reason and p.env == {}


def test_spread_puts_two_ranks_on_every_device_with_per_device_caps():
    p = _plan(fakes.nvidia(count=2, loaded="2.28.9"), nproc=4, placement="spread")
    assert p.device_indices == (0, 1, 0, 1) and p.shared_device
    assert p.memory_fraction == pytest.approx(0.45)  # 2 ranks per device, not 4
    assert p.backend == "gloo" and "Duplicate GPU detected" in p.backend_reason
    assert [p.device_label(i) for i in range(4)] == ["cuda:0", "cuda:1", "cuda:0", "cuda:1"]


def test_spread_with_one_rank_per_device_is_per_device():
    p = _plan(fakes.nvidia(count=2, loaded="2.30.7"), nproc=2, placement="spread")
    assert not p.shared_device and p.backend == "nccl" and p.env == {}


def test_eight_ranks_on_one_gpu_with_new_nccl_and_mps():
    p = _plan(fakes.nvidia(count=1, loaded="2.30.7", mps=True), nproc=8)
    assert p.device_indices == (0,) * 8 and p.memory_fraction == pytest.approx(0.1125)
    assert p.backend == "nccl" and p.warnings == ()
