"""Steady numbers for real on CPU with gloo: sweep repetitions with their median and spread,
the sampler's record, and contention judged against the host's cores (CI-sized)."""

import os

import pytest

from ddplab.reading.catalog import report_from_json
from ddplab.measurements import contention
from tests.conftest import load_json, processes_with_env, run_cli

pytestmark = pytest.mark.slow


def _run(tmp_path, *args):
    out = tmp_path / "out.json"
    proc = run_cli(*args, "--json", str(out), cwd=tmp_path)
    return proc, (load_json(out) if out.exists() else None)


def test_sweep_repeats_each_size_and_reports_the_median_and_spread(tmp_path):
    proc, doc = _run(tmp_path, "sweep", "--nproc", "2", "--ops", "all_reduce,all_gather", "-b", "64", "-e", "4K",
                     "-f", "8", "-n", "3", "-w", "1", "-R", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    r = doc["results"]
    assert doc["config"]["repeat"] == 3 and r["repeat"] == 3 and "median of 3" in r["time_method"]
    timed = [row for row in r["rows"] if "time_us" in row]
    assert len(timed) == 9  # all_reduce in place; all_gather both placements; 64, 512, 4096 B
    for row in timed:
        assert len(row["repeat_us"]) == 3 and row["num_wrong"] == 0
        assert row["time_us"] == sorted(row["repeat_us"])[1]
        assert (row["repeat_min_us"], row["repeat_max_us"]) == (min(row["repeat_us"]), max(row["repeat_us"]))
        assert row["algbw_gbps"] == pytest.approx(row["size_bytes"] / row["time_us"] / 1e3)
    for rank in r["ranks"]:  # every rank's own repetitions reproduce the averages
        assert all(len(row["repeats"]) == 3 for row in rank["rows"] if "repeats" in row)
    first = timed[0]
    per_rank = [next(x for x in rank["rows"] if (x["op"], x["size_bytes"], x["in_place"]) ==
                     (first["op"], first["size_bytes"], first["in_place"])) for rank in r["ranks"]]
    assert first["repeat_us"] == pytest.approx([sum(x["repeats"][i]["time_us"] for x in per_rank) / 2
                                                for i in range(3)])
    sampler = r["sampler"]
    assert sampler["on"] and sampler["device_queries_kept_out_of_timed_windows"]
    assert sampler["repetitions"] == 27 and sampler["repetitions_overlapped_by_a_device_query"] == 0
    assert isinstance(r["spikes"], list) and ("SPIKE" in proc.stdout) == bool(r["spikes"])
    assert doc["verdict"] == "pass" and "informational on the host" in r["spike_rule"]  # noise of shared cores
    assert processes_with_env("DDPLAB_RUN_ID", r["run_id"]) == []


def test_sweep_on_the_host_measures_once_by_default_and_records_the_sampler_off(tmp_path):
    proc, doc = _run(tmp_path, "sweep", "--nproc", "2", "-b", "1K", "-e", "4K", "-f", "4", "-n", "2", "--no-sample")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    r = doc["results"]
    assert doc["config"]["repeat"] == 1 and doc["config"]["sample"] is False
    assert all(len(row["repeat_us"]) == 1 for row in r["rows"])
    assert r["sampler"]["on"] is False and r["sampler"]["device_queries"] == 0
    assert r["timeseries"]["samples"] == []


def test_contention_on_the_host_is_judged_against_its_cores(golden_run):
    # the golden contention (2 processes, 0.2 s, 32x32: tests/golden/commands.py), run once per session
    proc, report = golden_run("contention")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = load_json(report)
    r = doc["results"]
    assert r["solo_tflops"] > 0 and len(r["together_tflops"]) == 2 and r["efficiency"] > 0
    cores = len(os.sched_getaffinity(0))
    assert r["ideal_basis"] == "cores" and r["usable_cores"] <= cores and r["threads_per_process"] == 1
    assert r["ideal_factor"] == min(2, r["usable_cores"])
    assert r["efficiency"] == pytest.approx(sum(r["together_tflops"]) / (r["ideal_factor"] * r["solo_tflops"]))
    assert "usable cores" in r["method"] and "of the ideal aggregate" in proc.stdout
    row, *rest = contention.checks(report_from_json(doc).results)
    assert [c.check for c in rest] in ([], ["peak host RSS"])  # that row when the 0.5 s sampler saw the ranks
    assert (row.verdict, doc["verdict"]) == ("info", "pass") and row.threshold == "informational on the host"
