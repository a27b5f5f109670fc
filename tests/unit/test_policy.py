"""The shared-device policy: caps, sharing decision and backend choice, with reasons."""

import argparse

import pytest

from ddplab.basics import cli_options
from ddplab.commands import options
from ddplab.records.config import LaunchOptions
from ddplab.errors import EnvironmentUnsupported, UsageError
from ddplab.platform import describe
from ddplab.job.policy import PRIVATE_DAEMON, RUNNING_DAEMON, plan
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
    assert p.backend == "gloo" and p.sharing_daemon is None
    assert "Duplicate GPU detected" in p.backend_reason and "2.28.9" in p.backend_reason
    assert "NCCL_MULTI_RANK_GPU_ENABLE=1" in p.backend_reason
    assert p.expected_failure is None


def test_new_nccl_with_daemon_control_uses_nccl_with_a_private_daemon():
    p = _plan(fakes.nvidia(loaded="2.30.7", built="2.28.9", mps_control=True), nproc=2)
    assert p.backend == "nccl" and p.sharing_daemon == PRIVATE_DAEMON
    assert p.env == {"NCCL_MULTI_RANK_GPU_ENABLE": "1"}
    assert "private MPS daemon" in p.backend_reason and fakes.MPS_CONTROL in p.backend_reason
    assert "45 us" in p.backend_reason and p.warnings == ()


def test_new_nccl_with_a_running_daemon_reuses_it_and_starts_none():
    p = _plan(fakes.nvidia(loaded="2.30.7", mps=True, mps_control=True), nproc=2)
    assert p.backend == "nccl" and p.sharing_daemon == RUNNING_DAEMON
    assert "already running" in p.backend_reason and "left running" in p.backend_reason
    assert p.warnings == ()


def test_new_nccl_without_daemon_control_falls_back_to_gloo_and_says_why():
    p = _plan(fakes.nvidia(loaded="2.30.7", mps=False, mps_control=False), nproc=2)
    assert p.backend == "gloo" and p.sharing_daemon is None and p.env == {}
    assert "nvidia-cuda-mps-control is not on PATH" in p.backend_reason
    assert "390 us" in p.backend_reason and "4,501.7 us" in p.backend_reason


def test_forced_nccl_without_daemon_runs_it_with_the_measured_cost():
    p = _plan(fakes.nvidia(loaded="2.30.7", mps_control=True), nproc=2, backend="nccl", sharing_daemon="off")
    assert p.backend == "nccl" and p.sharing_daemon is None
    assert p.env == {"NCCL_MULTI_RANK_GPU_ENABLE": "1"}
    assert "--no-mps" in p.backend_reason and "4,501.7 us per op" in p.backend_reason
    assert any("time-slice" in w and "4,501.7 us" in w for w in p.warnings)


def test_no_mps_without_a_backend_picks_gloo_and_names_the_way_to_force_nccl():
    p = _plan(fakes.nvidia(loaded="2.30.7", mps_control=True), nproc=2, sharing_daemon="off")
    assert p.backend == "gloo" and p.sharing_daemon is None
    [alone] = [o for o in p.considered if o.setup.startswith("nccl without")]
    assert "--backend nccl --no-mps" in alone.why and not alone.chosen


def test_every_option_considered_is_listed_with_exactly_one_chosen():
    p = _plan(fakes.nvidia(loaded="2.30.7", mps_control=True), nproc=2)
    assert [(o.backend, o.sharing_daemon, o.chosen) for o in p.considered] == [
        ("nccl", PRIVATE_DAEMON, True), ("gloo", None, False), ("nccl", None, False)]
    assert all(o.why for o in p.considered)
    assert p.considered[0].why == p.backend_reason


def test_daemon_failure_replans_to_gloo_with_reason_and_warning():
    platform = describe(fakes.nvidia(loaded="2.30.7", mps_control=True))
    p = plan(LaunchOptions(nproc=2), platform, daemon_failure="CUDA-capable device(s) is/are busy or unavailable")
    assert p.backend == "gloo" and p.sharing_daemon is None
    assert "could not be used: CUDA-capable device(s) is/are busy or unavailable" in p.backend_reason
    assert any("busy or unavailable" in w for w in p.warnings)


def test_daemon_failure_with_mps_insisted_is_exit_3():
    platform = describe(fakes.nvidia(loaded="2.30.7", mps_control=True))
    with pytest.raises(EnvironmentUnsupported) as err:
        plan(LaunchOptions(nproc=2, sharing_daemon="on"), platform, daemon_failure="quit unexpectedly")
    assert err.value.reference == "sharing-daemon-unavailable" and err.value.exit_code == 3
    assert "quit unexpectedly" in err.value.message


@pytest.mark.parametrize("probe", [fakes.musa(), fakes.cpu_only()])
def test_mps_on_a_vendor_without_a_daemon_is_exit_3(probe):
    with pytest.raises(EnvironmentUnsupported) as err:
        _plan(probe, nproc=2, sharing_daemon="on")
    assert err.value.reference == "no-sharing-daemon" and err.value.exit_code == 3


def test_mps_where_the_control_binary_is_missing_is_exit_3_before_anything_starts():
    with pytest.raises(EnvironmentUnsupported) as err:
        _plan(fakes.nvidia(loaded="2.30.7", mps_control=False), nproc=2, sharing_daemon="on")
    assert err.value.reference == "sharing-daemon-unavailable"
    assert "nvidia-cuda-mps-control is not on PATH" in err.value.message


def test_old_nccl_uses_gloo_under_a_private_daemon_when_one_can_be_started():
    # gloo under MPS measured 216 us vs 390 us without (docs/background.md §2): the fastest setup that works.
    p = _plan(fakes.nvidia(loaded="2.28.9", mps_control=True), nproc=2)
    assert p.backend == "gloo" and p.sharing_daemon == PRIVATE_DAEMON
    assert "216 us vs 390 us" in p.backend_reason
    assert [(o.backend, o.sharing_daemon, o.chosen) for o in p.considered] == [
        ("nccl", None, False), ("gloo", PRIVATE_DAEMON, True), ("gloo", None, False)]


def test_old_nccl_without_daemon_control_or_with_no_mps_is_plain_gloo():
    for probe, daemon in ((fakes.nvidia(loaded="2.28.9"), "auto"),
                          (fakes.nvidia(loaded="2.28.9", mps_control=True), "off")):
        p = _plan(probe, nproc=2, sharing_daemon=daemon)
        assert p.backend == "gloo" and p.sharing_daemon is None
        assert [(o.backend, o.chosen) for o in p.considered] == [("nccl", False), ("gloo", True)]


def test_mps_with_gloo_on_old_nccl_still_starts_the_daemon():
    p = _plan(fakes.nvidia(loaded="2.28.9", mps_control=True), nproc=2, sharing_daemon="on")
    assert p.backend == "gloo" and p.sharing_daemon == PRIVATE_DAEMON


def test_old_nccl_daemon_failure_replans_to_plain_gloo_with_a_warning():
    p = plan(LaunchOptions(nproc=2), describe(fakes.nvidia(loaded="2.28.9", mps_control=True)),
             daemon_failure="exited 1")
    assert p.backend == "gloo" and p.sharing_daemon is None
    assert any("exited 1" in w for w in p.warnings)


def test_one_rank_per_device_needs_no_daemon_unless_asked():
    probe = fakes.nvidia(count=2, loaded="2.30.7", mps_control=True)
    assert _plan(probe, nproc=2).sharing_daemon is None
    assert _plan(probe, nproc=2, sharing_daemon="on").sharing_daemon == PRIVATE_DAEMON


def test_sharing_daemon_option_has_three_values_from_the_flags():
    parser = argparse.ArgumentParser()
    cli_options.add_arguments(parser, LaunchOptions)
    assert [options.launch_options(LaunchOptions(), cli_options.values_given(LaunchOptions, parser.parse_args(argv)),
                                   {}).sharing_daemon for argv in ([], ["--mps"], ["--no-mps"])] == ["auto", "on", "off"]
    with pytest.raises(SystemExit):
        parser.parse_args(["--mps", "--no-mps"])
    with pytest.raises(UsageError) as err:
        LaunchOptions(sharing_daemon="yes")
    assert err.value.reference == "invalid-sharing-daemon" and "auto, on, off" in err.value.message


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


def test_env_shows_every_option_considered_and_why(monkeypatch):
    doc, screen = fakes.env_screen(monkeypatch, fakes.nvidia(loaded="2.30.7", mps_control=True))
    plan_ = doc["results"]["shared_device"]
    assert plan_["sharing_daemon"] == PRIVATE_DAEMON and [o["chosen"] for o in plan_["considered"]] == [
        True, False, False]
    assert "works with nccl" in screen
    assert "chosen   nccl with MPS (a private daemon, started and stopped by ddplab)" in screen
    assert "rejected gloo: slower (390 us per op" in screen
    assert "rejected nccl without MPS (time slicing): without the MPS daemon" in screen
    assert "used only when asked: --backend nccl --no-mps" in screen
    assert f"MPS: not running; ddplab can start a private one ({fakes.MPS_CONTROL})" in screen


def test_env_shows_why_gloo_when_the_daemon_cannot_be_had(monkeypatch):
    _, screen = fakes.env_screen(monkeypatch, fakes.nvidia(loaded="2.30.7", mps_control=False))
    assert "works with gloo" in screen
    assert "rejected nccl with MPS: no MPS daemon runs, and nvidia-cuda-mps-control is not on PATH" in screen
    assert "chosen   gloo" in screen
