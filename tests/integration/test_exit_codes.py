"""Exit codes: a bug in ddplab is 70 with one line and a traceback file; a backend this
machine lacks is 3 ("cannot run here"), not 2 ("bad usage"); a reader of stdout that goes away changes nothing."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ddplab.cli import main
from ddplab.errors import ExitCode
from tests.crafted_reports import FIXTURE


def _exit(argv) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def _traceback_path(line: str) -> Path:
    return Path(line.rsplit("full traceback: ", 1)[1].strip())


def test_internal_error_exits_70_with_one_line_and_the_traceback_in_a_temp_file(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the temp file goes, for this test
    monkeypatch.setattr("ddplab.report.page.render_html", _broken_renderer)
    report = tmp_path / "report.json"
    shutil.copy(FIXTURE, report)
    assert _exit(["report", str(report)]) == ExitCode.INTERNAL == 70
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: internal-error: ddplab report broke (RuntimeError: renderer bug at ")
    assert "test_exit_codes.py:" in lines[0]  # where it broke
    saved = _traceback_path(lines[0])
    assert saved.parent == tmp_path and saved.name.startswith("ddplab-traceback-")
    text = saved.read_text()
    assert text.startswith("Traceback") and "RuntimeError: renderer bug" in text


def _broken_renderer(doc, **options):
    raise RuntimeError("renderer bug")


def test_internal_error_traceback_goes_to_the_run_directory(tmp_path, capsys, monkeypatch):
    def broken_prepare(*args, **kwargs):
        raise KeyError("placement")

    monkeypatch.setattr("ddplab.job.session.prepare", broken_prepare)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    assert _exit(["train", "--run-dir", str(run_dir)]) == 70
    line = capsys.readouterr().err.strip()
    assert "ddplab train broke (KeyError: 'placement' at " in line
    saved = _traceback_path(line)
    assert saved.parent == run_dir.resolve() and "KeyError: 'placement'" in saved.read_text()


def test_a_real_process_exits_70_not_1(tmp_path):
    """The exit status the shell sees, with a bug planted in the renderer of a real process."""
    script = ("import sys, ddplab.report.page as h\n"
              "def broken(doc, **options): raise ZeroDivisionError('division by zero')\n"
              "h.render_html = broken\n"
              "from ddplab.cli import main\n"
              f"sys.exit(main(['report', {str(FIXTURE)!r}, '--out', {str(tmp_path / 'r.html')!r}]))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "TMPDIR": str(tmp_path)}, timeout=120)
    assert done.returncode == 70, done.stderr
    assert "ZeroDivisionError: division by zero" in done.stderr and "Traceback" not in done.stderr
    assert _traceback_path(done.stderr.strip()).parent == tmp_path


@pytest.mark.parametrize("argv", [["train", "--backend", "mpi"], ["storm", "--backend", "nccl"]])
def test_a_backend_this_machine_lacks_is_exit_3(tmp_path, capsys, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    assert _exit(argv) == 3
    err = capsys.readouterr().err
    assert "error: backend-unavailable" in err and f'backend "{argv[-1]}" is not available on this machine' in err
    assert "available: gloo" in err
    assert not (tmp_path / "ddplab-runs").exists()


def test_a_misspelled_backend_is_still_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _exit(["train", "--backend", "ncll"]) == 2
    assert 'maybe you meant "nccl"' in capsys.readouterr().err


def test_a_reader_that_goes_away_ends_neither_the_job_nor_its_report(tmp_path):
    """`ddplab train | head -1`: stdout's reader is gone after the first line. The job goes on without a screen,
    writes its report and exits with its own code (rich alone exited 1, and a lab then wrote no report)."""
    report = tmp_path / "train.json"
    proc = subprocess.Popen([sys.executable, "-m", "ddplab", "train", "--nproc", "2", "--steps", "3", "--run-dir",
                             str(tmp_path / "run"), "--json", str(report)], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    assert proc.stdout.readline()  # the placement, printed before the ranks start; the rest comes after the job
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=180) == 0, err
    assert json.loads(report.read_text())["verdict"] == "pass" and "Traceback" not in err
