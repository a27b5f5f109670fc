"""Outputs: refused before a launch when they cannot be written, written atomically, and a full
disk named as such ("no space left on device while writing PATH", exit 3), never a traceback,
a JSONDecodeError or half a JSON."""

import threading
import time

import pytest

from ddplab.basics.rundir import RunDir
from tests.conftest import run_cli
from tests.tmpfs import fill, small_disk, temporaries  # noqa: F401 (small_disk: a fixture)

TRAIN = ["train", "--nproc", "2"]


def test_json_into_a_directory_is_refused_before_anything_starts(tmp_path):
    started = time.monotonic()
    proc = run_cli(*TRAIN, "--json", str(tmp_path), cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "error: output-is-a-directory" in proc.stderr and str(tmp_path) in proc.stderr
    assert not (tmp_path / "ddplab-runs").exists()  # no run directory: nothing was launched
    assert time.monotonic() - started < 30  # refused at once, not after a run


def test_json_under_a_plain_file_is_refused_before_anything_starts(tmp_path):
    (tmp_path / "plain").write_text("x")
    proc = run_cli(*TRAIN, "--json", str(tmp_path / "plain" / "r.json"), cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and "error: output-not-writable" in proc.stderr
    assert not (tmp_path / "ddplab-runs").exists()


def test_a_used_run_dir_is_refused(tmp_path):
    holder = RunDir.create(str(tmp_path / "run"), "train")
    proc = run_cli(*TRAIN, "--run-dir", str(tmp_path / "run"), cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "error: run-dir-in-use" in proc.stderr and holder.run_id in proc.stderr
    assert list((tmp_path / "run" / "pids").iterdir()) == []  # no rank of a second run wrote there


def test_a_used_lab_out_and_drill_run_dir_are_refused(tmp_path):
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "report.json").write_text("{}")
    proc = run_cli("run", "--out", str(tmp_path / "lab"), cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and "error: run-dir-in-use" in proc.stderr
    (tmp_path / "drills" / "kill_rank").mkdir(parents=True)
    (tmp_path / "drills" / "kill_rank" / "x").write_text("an earlier drill's file")
    proc = run_cli("drill", "kill_rank", "--run-dir", str(tmp_path / "drills"), cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and "error: run-dir-in-use" in proc.stderr
    # a drill command's directory is its own run (its report.json beside the drills'): another drill is refused too
    (tmp_path / "drilled").mkdir()
    (tmp_path / "drilled" / "run-id").write_text("drill-20260101-000000-abcdef\n")
    proc = run_cli("drill", "stall", "--run-dir", str(tmp_path / "drilled"), cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and "drill-20260101-000000-abcdef" in proc.stderr
    assert sorted(p.name for p in (tmp_path / "drilled").iterdir()) == ["run-id"]


@pytest.mark.slow
def test_json_on_a_full_disk_is_refused_at_once(tmp_path, small_disk):
    fill(small_disk)
    proc = run_cli(*TRAIN, "--json", str(small_disk / "t.json"), cwd=tmp_path, timeout=60)
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"no space left on device while writing {small_disk / 't.json'}" in proc.stderr
    assert not (tmp_path / "ddplab-runs").exists()


@pytest.mark.slow
def test_run_dir_on_a_full_disk_names_enospc_not_a_json_error(tmp_path, small_disk):
    """The ranks cannot write their pid files, nor then elastic's error files, which elastic fails
    to parse (JSONDecodeError): the launcher must name the full disk instead."""
    fill(small_disk, leave_bytes=16384)  # room for the run directory and job.json
    done = threading.Event()

    def fill_once_launching():  # the disk fills up after job.json, while the ranks start
        while not done.is_set() and not (small_disk / "run" / "job.json").exists():
            time.sleep(0.005)
        fill(small_disk / "run")

    filler = threading.Thread(target=fill_once_launching)
    filler.start()
    try:
        proc = run_cli(*TRAIN, "--run-dir", str(small_disk / "run"), "--json", str(tmp_path / "t.json"),
                       cwd=tmp_path, timeout=240)
    finally:
        done.set()
        filler.join()
    text = proc.stdout + proc.stderr
    assert proc.returncode == 3, text[-3000:]
    assert "error: no-space-left" in proc.stderr
    assert f"no space left on device while writing {small_disk / 'run'}" in proc.stderr
    assert "JSONDecodeError" not in text and "Traceback" not in text


@pytest.mark.slow
def test_a_report_that_does_not_fit_is_not_left_half_written(tmp_path, small_disk):
    fill(small_disk, leave_bytes=8192)  # the check's one page fits; a 13 KB train report does not
    target = small_disk / "t.json"
    proc = run_cli(*TRAIN, "--run-dir", str(tmp_path / "run"), "--json", str(target), cwd=tmp_path, timeout=240)
    assert proc.returncode == 3, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert f"no space left on device while writing {target}" in proc.stderr
    assert "verdict:" not in proc.stdout and "Traceback" not in proc.stderr
    assert not target.exists() and temporaries(small_disk) == []
