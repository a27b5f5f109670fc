"""storm, sweep, ceiling, contention and compare for real on CPU with gloo (CI-sized)."""

import json
from pathlib import Path

import pytest

from ddplab.measurements import sweep as sweep_kind
from ddplab.reading.catalog import read_report
from ddplab.records import Verdict
from tests.conftest import load_json, processes_with_env, run_cli

pytestmark = pytest.mark.slow
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures/all_reduce_perf_2xH200_nccl2.28.9.txt"
ROW_KEYS = {"op", "size_bytes", "count", "dtype", "time_us", "algbw_gbps", "busbw_gbps", "num_wrong", "in_place"}


def _run(tmp_path, *args):
    out = tmp_path / "out.json"
    proc = run_cli(*args, "--json", str(out), cwd=tmp_path)
    return proc, (load_json(out) if out.exists() else None)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Every collective at 4, 128 and 4096 B, under a busbw floor no host reaches: one sweep for the tests of its
    rows, of the floor, and of `compare` (a healthy sweep's exit 0: test_sweep_three_ranks_blocking)."""
    folder = tmp_path_factory.mktemp("sweep")
    proc, doc = _run(folder, "sweep", "--nproc", "2", "--ops", "all", "-b", "4", "-e", "4K", "-f", "32", "-n", "3",
                     "-w", "1", "--min-busbw", "100000")
    assert doc is not None, proc.stdout + proc.stderr
    return proc, doc, folder / "out.json"


def test_sweep_every_collective_checked_and_correct(sweep):
    proc, doc, _ = sweep
    r = doc["results"]
    rows = r["rows"]
    assert {row["op"] for row in rows} == {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
                                           "all_to_all", "send_recv"}
    for row in rows:
        assert ROW_KEYS <= set(row), row
        assert row["num_wrong"] == 0 and row["time_us"] > 0
        assert row["size_bytes"] == row["count"] * 4
    # both placements where torch offers them, one where it does not
    assert {row["in_place"] for row in rows if row["op"] == "all_gather"} == {False, True}
    assert {row["in_place"] for row in rows if row["op"] == "all_reduce"} == {True}
    big = next(row for row in rows if row["op"] == "all_reduce" and row["size_bytes"] == 4096)
    assert big["busbw_gbps"] == pytest.approx(big["algbw_gbps"] * 2 * (2 - 1) / 2)
    # the nccl-tests layout is printed
    assert "#       size         count    type   redop    root" in proc.stdout
    assert "# Out of bounds values : 0 OK" in proc.stdout
    assert processes_with_env("DDPLAB_RUN_ID", r["run_id"]) == []


def test_sweep_min_busbw_floor_fails_with_exit_1(sweep):
    proc, doc, path = sweep
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert doc["verdict"] == "fail" and doc["results"]["avg_busbw_gbps"] < 100000
    # the floor alone fails it: no other check of the report, judged again from its data, fails
    report = read_report(str(path))
    assert {(c.check, c.verdict) for c in sweep_kind.checks(report.results) if c.verdict is Verdict.FAIL} == \
        {("average bus bandwidth", Verdict.FAIL)}


def test_sweep_three_ranks_blocking(tmp_path):
    proc, doc = _run(tmp_path, "sweep", "--nproc", "3", "--ops", "all_gather,reduce_scatter", "-b", "12",
                     "-e", "12K", "-f", "32", "-n", "2", "--mode", "blocking")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert all(row["num_wrong"] == 0 for row in doc["results"]["rows"])
    assert doc["results"]["mode"] == "blocking" and doc["results"]["world_size"] == 3


@pytest.mark.parametrize("argv, fragment", [
    (["sweep", "-b", "4X"], '"4X" is not a size'),
    (["sweep", "-b", "1G", "-e", "1M"], "larger than -e 1M"),
    (["sweep", "--ops", "allreduce"], 'maybe you meant "all_reduce"'),
    (["sweep", "--dtype", "fp64"], 'unknown dtype "fp64"'),
    (["sweep", "-b", "64G", "-e", "64G"], "sweep-too-large"),
    (["storm", "--iters", "0"], "--iters 0"),
    (["storm", "--mps"], "--mps asks for a device-sharing daemon"),
    (["contention", "--per-device"], "--per-device does not apply"),
])
def test_benchmark_bad_input_exits_2_before_launch(tmp_path, argv, fragment):
    proc = run_cli(*argv, cwd=tmp_path)
    assert proc.returncode in (2, 3), proc.stdout + proc.stderr
    assert fragment in proc.stderr
    assert not (tmp_path / "ddplab-runs").exists()


@pytest.fixture(scope="module")
def storm(golden_run):
    """The golden storm of 50 ops (its command and report; conftest.py runs it once for the golden keys too), for
    the tests that read it and the one that compares it. Its verdict is the host's speed: a loaded CI machine
    averaged 1156 us over 50 ops, over the host's 1000 us line, so the tests hold the verdict to the numbers, not
    to a pass (test_storm_threshold_failure_exits_1 tests the line)."""
    proc, report = golden_run("storm")
    return proc, (load_json(report) if report.exists() else None)


def test_storm_reports_latency_cpu_and_threshold(storm):
    proc, doc = storm
    assert doc is not None, proc.stdout + proc.stderr
    r = doc["results"]
    assert proc.returncode == (0 if r["mean_us"] <= r["threshold_us"] else 1), proc.stdout + proc.stderr
    assert r["correct"] is True and r["mean_us"] > 0
    assert r["per_op_us"]["n"] == 50 and r["per_op_us"]["p99"] >= r["per_op_us"]["p50"]
    assert r["device_us"] is None  # the host has no device events
    assert r["threshold_us"] == 1000 and "host" in r["threshold_reason"]
    for rank in r["ranks"]:
        assert rank["cpu_user_s"] >= 0 and rank["ctx_switches"] > 0
    assert "pipelined" in r["method"]


def test_storm_threshold_failure_exits_1(tmp_path):
    proc, doc = _run(tmp_path, "storm", "--nproc", "2", "--iters", "200", "--threshold-us", "0.001")
    assert proc.returncode == 1 and doc["results"]["within_threshold"] is False


def test_ceiling_on_host(golden_run):
    # The golden ceiling (tests/golden/commands.py), run once per session. (Contention on the host:
    # test_steady_numbers_cpu.py, which checks the golden contention's numbers.)
    proc, report = golden_run("ceiling")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = load_json(report)
    d = doc["results"]["device_copy"]
    assert d["gbps"] > 0 and d["rw_gbps"] == pytest.approx(2 * d["gbps"])


def test_compare_fixture_with_a_sweep(sweep, tmp_path):
    sweep_json = sweep[2]
    # gloo on 2 cores is far more than the largest tolerance (10000%) slower than NVLink: judge no size that B
    # timed. The fixture's sizes from 16K to 4G, which B never timed, are judged: missing from B, a failure.
    proc = run_cli("compare", str(FIXTURE), str(sweep_json), "--tolerance", "10000%", "--min-size", "8K", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "2 rows compared" in proc.stdout  # 4 and 4096 bytes, in-place: the sizes both timed
    assert ("all_reduce in-place at 16K, 64K, 256K, 1M, 4M, 16M, 64M, 256M bytes and 2 more size(s): missing from B"
            in proc.stdout)
    assert "20 row(s) and 0 stage(s) of A missing from B: FAIL" in proc.stdout
    # nccl-tests cut to the sizes B timed: nothing judged is missing (the out-of-place rows, which torch's
    # all_reduce has not, are below --min-size).
    trimmed = tmp_path / "all_reduce_to_4K.txt"
    trimmed.write_text("".join(line for line in FIXTURE.read_text().splitlines(keepends=True)
                               if not line.split() or line.startswith("#") or int(line.split()[0]) <= 4096))
    proc = run_cli("compare", str(trimmed), str(sweep_json), "--tolerance", "10000%", "--min-size", "8K",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 rows compared" in proc.stdout and "missing" not in proc.stdout
    proc = run_cli("compare", str(FIXTURE), str(sweep_json), cwd=tmp_path)  # gloo on 2 cores vs NVLink
    assert proc.returncode == 1 and "<- slower" in proc.stdout
    proc = run_cli("compare", str(sweep_json), str(sweep_json), cwd=tmp_path)
    assert proc.returncode == 0 and "0 slower" in proc.stdout


def test_compare_lines_up_storm_reports_through_their_record(storm, tmp_path):
    proc, doc = storm
    assert doc is not None, proc.stdout + proc.stderr
    same = tmp_path / "storm.json"
    same.write_text(json.dumps(doc))
    doc = json.loads(json.dumps(doc))
    doc["results"]["mean_us"] *= 1.5  # planted: the storm got 50% slower
    slower = tmp_path / "slower.json"
    slower.write_text(json.dumps(doc))
    proc = run_cli("compare", str(same), str(slower), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "storm" in proc.stdout and "50.0%" in proc.stdout and "<- slower" in proc.stdout
    assert run_cli("compare", str(slower), str(slower), cwd=tmp_path).returncode == 0
