"""Steady sweep numbers: repetitions and their median, spikes, the sampler's timed windows,
and `compare` telling spikes apart from regressions. Pure functions, no processes."""

import argparse
import json
import threading
import time

import pytest
from rich.console import Console

from ddplab.reading import comparison
from ddplab.measurements import spikes
from ddplab.measurements.checks import finding_verdict
from ddplab.supervision import timed_windows
from ddplab.commands import compare as compare_cmd
from ddplab.commands import sweep as sweep_cmd
from ddplab.errors import UsageError
from ddplab.measurements import sweep
from ddplab.platform.device_monitor import DeviceMonitor, DeviceSample
from ddplab.records import Verdict
from ddplab.records.compare import TimedRow
from ddplab.records.sweep import Repetition, SweepRankRow, SweepRow
from ddplab.basics.rundir import RunDir
from ddplab.supervision.sampler import RankSampler
from ddplab.supervision.beacon import Beacon
from tests.unit.sweep_records import sweep_record

MiB = 1 << 20


def series(times_by_size: dict[int, float], op="all_reduce", in_place=True) -> list[TimedRow]:
    return [TimedRow(op, size, in_place, t) for size, t in times_by_size.items()]


def smooth(step: int, sizes: int = 12, first: int = 8) -> dict[int, float]:
    """Latency-bound then bandwidth-bound, as a real curve: 20 us + size / (300 GB/s)."""
    return {first * step ** i: 20.0 + first * step ** i / 300e3 for i in range(sizes)}


# --- spike detection -----------------------------------------------------------------------

@pytest.mark.parametrize("step", [2, 4, 8])
def test_a_smooth_curve_has_no_spike_at_any_step_factor(step):
    assert spikes.find_spikes(series(smooth(step))) == []


def test_a_planted_spike_is_flagged_with_its_neighbours_and_factor():
    # the H200 case: all_reduce 8 MiB took 305 us between 4 MiB (30 us) and 16 MiB (77 us)
    rows = series({2 * MiB: 21.0, 4 * MiB: 30.0, 8 * MiB: 305.0, 16 * MiB: 77.0, 32 * MiB: 140.0})
    found = spikes.find_spikes(rows)
    assert len(found) == 1
    spike = found[0]
    assert (spike.op, spike.size_bytes, spike.in_place, spike.time_us) == ("all_reduce", 8 * MiB, True, 305.0)
    assert [(n.size_bytes, n.time_us) for n in spike.neighbours] == [(4 * MiB, 30.0), (16 * MiB, 77.0)]
    assert spike.factor == pytest.approx(305.0 / 77.0, abs=0.01)  # above the closer bound: the larger neighbour


def test_slow_against_one_neighbour_only_is_not_a_spike():
    # 2.5x the smaller neighbour but only 1.5x the larger one: a step in the curve, not a spike
    assert spikes.find_spikes(series({1024: 20.0, 2048: 50.0, 4096: 33.0})) == []


def test_the_smallest_size_is_compared_with_its_one_neighbour():
    assert spikes.find_spikes(series({8: 215.0, 16: 18.0, 32: 18.5}))[0].size_bytes == 8
    assert spikes.find_spikes(series({8: 30.0, 16: 18.0, 32: 18.5})) == []


def test_the_largest_size_is_compared_with_its_neighbour_scaled_by_size():
    # -f 4 at the bandwidth-bound end: 4x the time for 4x the bytes is the curve, not a spike
    assert spikes.find_spikes(series({64 * MiB: 250.0, 256 * MiB: 900.0, 1024 * MiB: 3300.0})) == []
    found = spikes.find_spikes(series({64 * MiB: 250.0, 256 * MiB: 900.0, 1024 * MiB: 9000.0}))
    assert [x.size_bytes for x in found] == [1024 * MiB]
    assert found[0].factor == pytest.approx(9000.0 / (900.0 * 4), abs=0.01)


def test_series_are_per_op_and_placement_and_untimed_rows_are_ignored():
    out_of_place = series({1024: 20.0, 2048: 20.0, 4096: 20.0}, in_place=False)
    in_place = series({1024: 60.0, 2048: 60.0, 4096: 60.0}, in_place=True)  # slower, but smooth in itself
    other_op = series({2048: 100.0}, op="broadcast")
    untimed = [SweepRow(op="all_reduce", dtype="float", size_bytes=3000, in_place=False, error="boom")]
    assert spikes.find_spikes(out_of_place + in_place + other_op + untimed) == []


# --- repetitions: median and spread --------------------------------------------------------

def rank_row(times, windows=None, size=1024):
    windows = windows or [(100.0 + i, 100.5 + i) for i in range(len(times))]
    return SweepRankRow(op="all_reduce", size_bytes=size, count=size // 4, in_place=True, num_wrong=0,
                        repeats=[Repetition(t, w, 0.0) for t, w in zip(times, windows)])


def test_merged_row_reports_the_median_repetition_and_the_spread():
    rank0 = rank_row([100.0, 500.0, 120.0])
    rank1 = rank_row([110.0, 520.0, 140.0])
    row = sweep.merge_rows([[rank0], [rank1]], n=2, dtype="float")[0]
    assert row.repeat_us == [105.0, 510.0, 130.0]  # averaged over ranks (nccl-tests -a 1), in order
    assert row.time_us == 130.0  # the median repetition, not the mean (248.3)
    assert (row.repeat_min_us, row.repeat_max_us) == (105.0, 510.0)
    assert row.time_us_max_rank == 140.0  # the slowest rank of that repetition
    assert row.algbw_gbps == pytest.approx(1024 / 130.0 / 1e3)  # bandwidth from the median
    assert row.busbw_gbps == pytest.approx(row.algbw_gbps)  # all_reduce, 2 ranks: factor 1


def test_an_even_count_takes_the_lower_middle_repetition():
    row = sweep.merge_rows([[rank_row([10.0, 40.0, 20.0, 30.0])]], n=1, dtype="float")[0]
    assert row.time_us == 20.0 and row.time_us in row.repeat_us


def test_each_repetition_says_whether_a_device_query_overlapped_it():
    windows = [(100.0, 100.1), (101.0, 101.1), (102.0, 102.1)]
    queries = [(101.05, 101.2), (103.0, 103.01)]  # the second lands between windows
    row = sweep.merge_rows([[rank_row([1.0, 2.0, 3.0], windows)]], 1, "float", queries)[0]
    assert row.repeat_sampler_queried == [False, True, False]


def test_repeat_is_validated_and_its_default_depends_on_the_device():
    parser = argparse.ArgumentParser()
    sweep_cmd.add_arguments(parser)
    with pytest.raises(UsageError) as err:
        sweep_cmd.config_from_args(parser.parse_args(["-R", "0"]))
    assert err.value.reference == "invalid-repeat" and err.value.exit_code == 2
    assert sweep_cmd.config_from_args(parser.parse_args([])).repeat is None  # resolved once the device is known
    assert (sweep.default_repeat(host_only=False), sweep.default_repeat(host_only=True)) == (3, 1)
    text = " ".join(parser.format_help().split())
    assert "default: 3 on an" in text and "1 on the host CPU" in text and "--no-sample" in text


# --- what a sweep with a spike says ---------------------------------------------------------

def sweep_rows(times_by_size: dict[int, float]) -> list[SweepRow]:
    return [SweepRow(op="all_reduce", dtype="float", size_bytes=size, count=size // 4, in_place=True, time_us=t,
                     algbw_gbps=1.0, busbw_gbps=1.0, num_wrong=0) for size, t in times_by_size.items()]


def test_a_spike_makes_the_sweep_warn_and_is_shown_after_its_block():
    rows = sweep_rows({8: 18.0, 16: 215.0, 32: 18.5})
    r = sweep_record(rows, repeat=3)
    assert r.spikes and measurements_verdict(r) == Verdict.WARN
    assert measurements_verdict(sweep_record(rows, spikes=[], repeat=3)) == Verdict.PASS
    table = sweep_cmd.nccl_tests_table(r)
    assert "median of 3 repetitions" in table.splitlines()[0]
    spike_line = next(line for line in table.splitlines() if line.startswith("# SPIKE"))
    assert "16 B in-place" in spike_line and spikes.FINDING in spike_line
    # nccl-tests' layout is kept: every data row still parses as one
    from ddplab.measurements import nccl_tests
    assert [x.size_bytes for x in nccl_tests.parse(table).rows if x.in_place] == [8, 16, 32]


def measurements_verdict(record) -> Verdict:
    from ddplab import measurements

    return measurements.verdict(sweep, record)


def spike_rows(record) -> list:
    return [c for c in sweep.checks(record) if c.check == "no size far off its neighbours"]


def test_on_the_host_spikes_are_listed_but_informational():
    r = sweep_record(sweep_rows({8: 18.0, 16: 215.0, 32: 18.5}), host_only=True)
    assert measurements_verdict(r) == Verdict.PASS and "informational" in sweep.summary(r)
    row, = spike_rows(r)
    assert row.verdict == Verdict.INFO and "16 B" in row.value
    assert finding_verdict(r.spikes, host_only=False) == Verdict.WARN


def test_the_check_row_for_spikes_warns_with_the_finding():
    r = sweep_record(sweep_rows({8: 18.0, 16: 215.0, 32: 18.5}))
    found = spike_rows(r)
    assert len(found) == 1 and found[0].verdict == Verdict.WARN
    assert spikes.FINDING in found[0].meaning and "16 B" in found[0].value
    steady = spike_rows(sweep_record(r.rows, spikes=[]))
    assert steady[0].verdict == Verdict.PASS


# --- compare: spikes apart from regressions -------------------------------------------------

def test_compare_reports_a_spike_in_b_apart_from_regressions():
    old = series({8: 18.0, 16: 18.0, 32: 18.5, 64: 19.0})
    new = series({8: 18.0, 16: 215.0, 32: 18.5, 64: 30.0})  # 16 B a spike; 64 B really slower
    rows = {r.size_bytes: r for r in comparison.line_up(old, new, 0.05, 0)}
    assert rows[16].spike and not rows[16].regression and rows[16].spike_factor > 2
    assert rows[64].regression and not rows[64].spike
    assert not rows[8].spike and not rows[8].regression


def _sweep_doc(times_by_size) -> dict:
    """A whole sweep report, as `ddplab sweep --json` writes it, with these times."""
    from ddplab import measurements
    from ddplab.measurements.sweep import SweepConfig

    record = sweep_record(sweep_rows(times_by_size))
    return measurements.report(sweep, SweepConfig(), record).to_json()


def test_compare_with_only_a_spike_warns_and_exits_0(tmp_path):
    a, b, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "cmp.json"
    a.write_text(json.dumps(_sweep_doc({8: 18.0, 16: 18.0, 32: 18.5})))
    b.write_text(json.dumps(_sweep_doc({8: 18.0, 16: 215.0, 32: 18.5})))
    console = Console(record=True, width=200)
    args = argparse.Namespace(old=str(a), new=str(b), tolerance="5%", min_size="0", json=str(out), html=None)
    assert compare_cmd.main(args, console) == 0
    text = console.export_text()
    assert "<- spike in B" in text and "<- slower" not in text and spikes.FINDING in text
    assert json.loads(out.read_text())["verdict"] == "warn"


# --- the sampler keeps out of timed windows -------------------------------------------------

def test_the_gate_skips_a_device_query_while_a_rank_is_timing(tmp_path):
    run = RunDir.create(str(tmp_path / "run"), "t")
    status = Beacon(run, 0, 0).start()
    with timed_windows.device_query(run) as clear:
        assert clear  # the rank is "before-init"
        assert run.sampler_flag.exists()  # raised while the query runs
    assert not run.sampler_flag.exists()
    with timed_windows.timing(status):
        assert json.loads(status.path.read_text())["phase"] == "timing"
        with timed_windows.device_query(run) as clear:
            assert not clear
    assert json.loads(status.path.read_text())["phase"] == "running"


def test_a_rank_waits_while_the_sampler_queries(tmp_path):
    run = RunDir.create(str(tmp_path / "run"), "t")
    status = Beacon(run, 0, 0).start()
    flag = run.sampler_flag
    flag.touch()  # the sampler is querying the device
    threading.Timer(0.2, flag.unlink).start()
    with timed_windows.timing(status) as waited_s:
        assert not flag.exists()
    assert 0.15 <= waited_s < timed_windows.MAX_WAIT_S


class CountingMonitor(DeviceMonitor):
    api = "fake"

    def __init__(self):
        self.calls = 0

    def sample(self) -> DeviceSample:
        self.calls += 1
        return DeviceSample(device_used_bytes={0: 1})


def test_the_sampler_skips_device_queries_inside_timed_windows_unless_told(tmp_path):
    run = RunDir.create(str(tmp_path / "run"), "t")
    status = Beacon(run, 0, 0).start()
    status.phase(timed_windows.TIMING_PHASE)
    monitor = CountingMonitor()
    kept_out = RankSampler(run, monitor)
    assert kept_out.sample_once().device_used_bytes == {} and monitor.calls == 0
    assert kept_out.timeseries().device_queries_skipped_while_timing == 1
    inside = RankSampler(run, monitor, query_device_while_timing=True)
    before = time.time()
    assert inside.sample_once().device_used_bytes == {0: 1} and monitor.calls == 1
    (start, end), = inside.device_queries
    assert before <= start <= end <= time.time()
    assert inside.timeseries().device_queries_kept_out_of_timed_windows is False
