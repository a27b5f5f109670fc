"""The sweep's records: the JSON each row kind writes (the keys of the reports before the redesign), reading
back reports of earlier versions, and the check rows that make the verdict (one rule: worst of the checks)."""

import dataclasses
import json

import pytest

from ddplab import measurements
from ddplab.measurements.sweep import SweepConfig
from ddplab.measurements import sweep
from ddplab.records import RecordError, Verdict
from ddplab.records.codec import from_json, to_json
from ddplab.records.sweep import SweepRecord, SweepRow
from ddplab.reading.catalog import report_from_json
from tests.unit.sweep_records import sweep_record

TIMED = SweepRow(op="all_reduce", dtype="float", size_bytes=8, count=2, in_place=True, time_us=20.0,
                 time_us_max_rank=21.0, algbw_gbps=0.4, busbw_gbps=None, num_wrong=None, repeat_us=[20.0],
                 repeat_min_us=20.0, repeat_max_us=20.0, repeat_sampler_queried=[False])


def test_each_kind_of_row_writes_the_keys_it_wrote_before():
    timed = to_json(TIMED)
    assert timed["busbw_gbps"] is None and timed["num_wrong"] is None  # one rank, --no-check: null, not absent
    assert set(timed) == {"op", "dtype", "size_bytes", "count", "in_place", "time_us", "time_us_max_rank",
                          "algbw_gbps", "busbw_gbps", "num_wrong", "repeat_us", "repeat_min_us", "repeat_max_us",
                          "repeat_sampler_queried"}
    failed = SweepRow(op="all_to_all", dtype="float", size_bytes=8, count=2, in_place=False, error="RuntimeError: x")
    assert set(to_json(failed)) == {"op", "dtype", "size_bytes", "count", "in_place", "error"}
    skipped = SweepRow(op="send_recv", dtype="float", skipped="needs at least 2 ranks")
    assert set(to_json(skipped)) == {"op", "dtype", "skipped"}
    for row in (TIMED, failed, skipped):
        assert from_json(SweepRow, to_json(row)) == row


def test_a_sweep_report_reads_back_equal():
    record = sweep_record([TIMED, dataclasses.replace(TIMED, size_bytes=64, count=16, time_us=25.0)],
                          min_busbw=1.0, world_size=1)
    doc = json.loads(json.dumps(measurements.report(sweep, SweepConfig(), record).to_json()))
    back = report_from_json(doc)
    assert back.results == record and back.config == SweepConfig(repeat=1)  # the repetitions as they ran
    assert back.verdict == Verdict.WARN  # one rank: the floor cannot be judged


def test_a_report_from_before_spikes_and_the_sampler_still_reads():
    doc = to_json(sweep_record([TIMED]))
    for key in ("time_method", "repeat", "spikes", "spike_rule", "sampler"):
        doc.pop(key, None)
    record = from_json(SweepRecord, doc)
    assert record.spikes is None and record.repeat == 1
    assert "no size far off its neighbours" not in [c.check for c in sweep.checks(record)]


def test_a_size_that_is_not_a_positive_number_is_refused_in_the_users_terms():
    doc = to_json(sweep_record([TIMED]))
    doc["rows"][0]["size_bytes"] = "8"
    with pytest.raises(RecordError) as err:
        from_json(SweepRecord, doc, "$.results")
    assert (err.value.path, err.value.expected, err.value.value) == ("$.results.rows[0].size_bytes", "a number > 0",
                                                                     "8")
    doc["rows"][0]["size_bytes"] = 0
    with pytest.raises(RecordError):
        from_json(SweepRecord, doc, "$.results")


# --- the verdict: worst of the check rows -------------------------------------------------------------

def verdict(record) -> Verdict:
    return measurements.verdict(sweep, record)


def rows_named(record, name):
    return [c for c in sweep.checks(record) if c.check == name]


def test_the_busbw_floor_is_a_check_row():
    rows = [dataclasses.replace(TIMED, busbw_gbps=2.0, num_wrong=0)]
    below = sweep_record(rows, min_busbw=3.0)
    floor, = rows_named(below, "average bus bandwidth")
    assert floor.verdict == Verdict.FAIL and floor.value == "2.00 GB/s" and "3" in floor.threshold
    assert verdict(below) == Verdict.FAIL
    assert rows_named(sweep_record(rows, min_busbw=2.0), "average bus bandwidth")[0].verdict == Verdict.PASS
    assert rows_named(sweep_record(rows), "average bus bandwidth") == []  # no floor asked: no row


def test_one_rank_cannot_judge_a_floor_and_says_so():
    one_rank = sweep_record([TIMED], min_busbw=1.0, world_size=1)
    floor, = rows_named(one_rank, "average bus bandwidth")
    assert floor.verdict == Verdict.WARN and "world size 1" in floor.value
    assert verdict(one_rank) == Verdict.WARN


def test_setup_warnings_make_the_sweep_warn_through_a_row():
    record = sweep_record([dataclasses.replace(TIMED, num_wrong=0)], warnings=["2 ranks time-slice device 0"])
    row, = rows_named(record, "setup warnings")
    assert row.verdict == Verdict.WARN and "time-slice" in row.value and verdict(record) == Verdict.WARN


def test_wrong_data_or_a_failed_op_fails_and_an_incomplete_sweep_has_one_row():
    wrong = sweep_record([dataclasses.replace(TIMED, num_wrong=3)])
    assert rows_named(wrong, "collective results correct")[0].verdict == Verdict.FAIL == verdict(wrong)
    failed = SweepRow(op="all_to_all", dtype="float", size_bytes=8, count=2, in_place=False, error="RuntimeError: x")
    assert verdict(sweep_record([dataclasses.replace(TIMED, num_wrong=0), failed])) == Verdict.FAIL
    incomplete = sweep_record([], completed=False)
    assert [(c.check, c.verdict) for c in sweep.checks(incomplete)] == [("sweep completed", Verdict.FAIL)]
