"""train, ceiling and contention as library measurements (issue 11): Configs that give back their command line,
records that read back what they wrote, and check rows that carry every verdict the commands gave."""

import argparse

import pytest

from ddplab import measurements
from ddplab.commands import ceiling as ceiling_command
from ddplab.commands import contention as contention_command
from ddplab.commands import train as train_command
from ddplab.records.config import LaunchOptions
from ddplab.measurements.ceiling import CeilingConfig
from ddplab.measurements.contention import ContentionConfig
from ddplab.measurements.train import TrainConfig
from ddplab.errors import UsageError
from ddplab.measurements import ceiling, contention, train
from ddplab.records import Verdict
from ddplab.records.ceiling import CeilingRecord, DeviceCopy
from ddplab.records.codec import from_json, to_json
from ddplab.records.contention import ContentionRecord
from ddplab.records.session import Distribution
from ddplab.records.train import TrainRecord
from ddplab.reading.catalog import report_from_json
from tests.unit.fake_sessions import sample, session_record, train_rank


def parsed(command, argv: list[str]):
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    return command.config_from_args(parser.parse_args(argv))


@pytest.mark.parametrize("command, config", [
    (train_command, TrainConfig()),
    (train_command, TrainConfig(launch=LaunchOptions(nproc=3, placement="shared", backend="gloo", device="cpu",
                                                     hang_timeout_s=30.0, sharing_daemon="off", timeout_s=60.0),
                                steps=5, model="mlp", batch_size=8, seed=7, check_every=2)),
    (ceiling_command, CeilingConfig()),
    (ceiling_command, CeilingConfig(device="cpu", run_dir="/tmp/stage", bytes=64 << 20, host_bytes=3, iters=5)),
    (contention_command, ContentionConfig()),
    (contention_command, ContentionConfig(launch=LaunchOptions(nproc=3, sharing_daemon="on", reserve=0.2),
                                          size=128, seconds=0.5)),
])
def test_a_config_s_command_line_gives_it_back(command, config):
    assert parsed(command, config.to_argv()) == config


def test_contention_always_shares_one_device_and_time_slices_unless_asked():
    assert ContentionConfig().launch.placement == "shared"
    assert ContentionConfig().launch.sharing_daemon == "off"  # time slicing is what it measures
    assert ContentionConfig(launch=LaunchOptions(sharing_daemon="on")).launch.sharing_daemon == "on"
    assert ContentionConfig().size is None and ContentionConfig().batch is None  # chosen with the device
    with pytest.raises(UsageError) as err:
        ContentionConfig(launch=LaunchOptions(placement="per-device"))
    assert err.value.reference == "contention-needs-shared-device" and "--per-device" in err.value.message


@pytest.mark.parametrize("kwargs, reference", [
    ({"size": 8}, "invalid-size"), ({"size": 100_000}, "invalid-size"), ({"seconds": 0.01}, "invalid-seconds"),
    ({"seconds": float("nan")}, "invalid-seconds"),
])
def test_contention_config_refuses_bad_values(kwargs, reference):
    with pytest.raises(UsageError) as err:
        ContentionConfig(**kwargs)
    assert err.value.reference == reference


def test_contention_picks_the_kernel_for_the_device_it_landed_on():
    class Host:
        host_only = True

    class Device:
        host_only = False

    assert contention.settings_for(ContentionConfig(), Host()).size == 512
    assert contention.settings_for(ContentionConfig(), Host()).batch == 4
    assert contention.settings_for(ContentionConfig(), Device()).size == 8192
    assert contention.settings_for(ContentionConfig(), Device()).batch == 20
    assert contention.settings_for(ContentionConfig(size=64), Device()).size == 64


def test_ceiling_is_one_rank_on_device_zero_and_its_json_config_stays_flat():
    config = CeilingConfig(device="cpu", run_dir="/tmp/stage")
    assert (config.launch.nproc, config.launch.placement) == (1, "per-device")
    assert (config.launch.device, config.launch.run_dir) == ("cpu", "/tmp/stage")
    written = to_json(config)
    assert set(written) == {"nproc", "placement", "backend", "device", "memory_fraction", "reserve", "timeout_s",
                            "run_dir", "sharing_daemon", "hang_timeout_s", "nnodes", "rdzv_endpoint", "rdzv_host",
                            "bytes", "host_bytes", "iters"}
    assert from_json(CeilingConfig, written) == config


@pytest.mark.parametrize("kwargs, reference", [
    ({"iters": 0}, "invalid-iters"), ({"bytes": 0}, "invalid-bytes"), ({"host_bytes": 1 << 60}, "invalid-host-bytes"),
])
def test_ceiling_config_refuses_bad_values(kwargs, reference):
    with pytest.raises(UsageError) as err:
        CeilingConfig(**kwargs)
    assert err.value.reference == reference


def test_an_unknown_device_type_is_refused_by_the_command_line():
    """Device types are the vendor table's names, which the Configs do not import: the command line checks them
    (cli_options.Vocabulary), and the platform again when it resolves the device (platform.describe)."""
    with pytest.raises(UsageError) as err:
        parsed(ceiling_command, ["--device", "gpu"])
    assert err.value.reference == "invalid-device" and 'unknown device "gpu"' in err.value.message


def _train_record(world: int = 2, **ranks) -> TrainRecord:
    return train.record_of(session_record(world_size=world), [train_rank(r, world=world, **ranks)
                                                              for r in range(world)])


def test_train_combines_every_rank_s_proofs():
    record = _train_record()
    assert record.params_identical and record.grad_matches_reference and record.local_grad_differs
    assert record.step_time_us.n == 4 and record.step_time_us.p50 == 100.0
    assert [c.check for c in train.checks(record)] == ["gradients synchronised", "negative control", "step time"]
    assert measurements.verdict(train, record) == Verdict.PASS
    mixed = train.record_of(session_record(), [train_rank(0), train_rank(1, digest="cd" * 32)])
    assert mixed.params_identical is False and measurements.verdict(train, mixed) == Verdict.FAIL


def test_a_negative_control_that_cannot_tell_fails_on_its_own_row():
    record = _train_record(local_differs=False)
    rows = {c.check: c.verdict for c in train.checks(record)}
    assert rows == {"gradients synchronised": Verdict.PASS, "negative control": Verdict.FAIL,
                    "step time": Verdict.INFO}


def test_one_rank_has_no_negative_control_and_still_passes():
    record = _train_record(world=1, local_differs=None)
    assert record.local_grad_differs is None
    control = next(c for c in train.checks(record) if c.check == "negative control")
    assert control.verdict == Verdict.SKIP and measurements.verdict(train, record) == Verdict.PASS


def test_ceiling_judges_only_that_its_rank_finished():
    copy = DeviceCopy(size_bytes=1 << 20, time_us=10.0, gbps=104.9, method="test", iters=2, rw_gbps=209.7)
    done = CeilingRecord(session=session_record(world_size=1), device_copy=copy)
    assert [(c.check, c.verdict) for c in ceiling.checks(done)] == [("device copy bandwidth", Verdict.INFO)]
    failed = CeilingRecord(session=session_record(completed=False, world_size=1))
    assert [(c.check, c.verdict) for c in ceiling.checks(failed)] == [("ceiling completed", Verdict.FAIL)]
    assert ceiling.summary(failed) == "rank 0 failed"


@pytest.mark.parametrize("record_class, record", [
    (CeilingRecord, CeilingRecord(session=session_record(completed=False, world_size=1))),
    (ContentionRecord, ContentionRecord(session=session_record(completed=False))),
])
def test_the_record_of_a_run_that_failed_reads_back(record_class, record):
    """A failed run writes no summary keys; its report must still load (`ddplab report`, `compare`)."""
    written = to_json(record)
    assert "device_copy" not in written and "efficiency" not in written
    assert to_json(from_json(record_class, written)) == written


def test_a_train_report_reads_back_as_the_record_it_was_written_from():
    config = TrainConfig(steps=2)
    written = measurements.report(train, config, _train_record()).to_json()
    back = report_from_json(written)
    assert back.config == config and isinstance(back.results, TrainRecord)
    assert back.to_json()["results"] == written["results"]
    assert measurements.verdict(train, back.results) == Verdict(written["verdict"])


def test_the_memory_chart_draws_device_memory_when_any_was_sampled_else_rss():
    samples = (sample(0.5, {0: 100, 1: 110}), sample(1.0, {0: 120, 1: 130}, device={0: 7, 1: None}))
    record = TrainRecord(session=session_record(samples=samples), params_identical=True,
                         grad_matches_reference=True, local_grad_differs=True,
                         step_time_us=Distribution.of([1.0]), step_time_method="test")
    series = record.session.timeseries.memory()
    assert series.what == "device memory" and series.by_rank == {0: [(1.0, 7)]}
    host = TrainRecord(session=session_record(samples=samples[:1]), params_identical=True,
                       grad_matches_reference=True, local_grad_differs=True,
                       step_time_us=Distribution.of([1.0]), step_time_method="test")
    assert host.session.timeseries.memory().what == "host RSS"
    assert host.session.timeseries.memory().by_rank == {0: [(0.5, 100)], 1: [(0.5, 110)]}


def test_compare_lines_up_a_train_run_by_its_step_time_p50():
    [row] = _train_record().timed_rows()
    assert (row.op, row.size_bytes, row.in_place, row.time_us) == ("train", 0, True, 100.0)
    assert train.record_of(session_record(completed=False), []).timed_rows() == []
