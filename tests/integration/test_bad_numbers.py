"""Numbers no run can use (nan, inf, 1e15, a billion sweep sizes, buffers larger than the
memory the ranks run on) are refused with exit 2 and the value, before anything starts."""

import importlib

import psutil
import pytest

from ddplab.cli import main
from ddplab.basics.rundir import RunDir
from tests.conftest import run_cli

GiB = 1 << 30

NON_FINITE_OR_ABSURD = [
    (["train", "--timeout", "inf"], "--timeout inf is not a finite number; valid: 0 < seconds <= 86400"),
    (["train", "--timeout", "1e15"], "--timeout 1000000000000000.0 is out of range"),
    (["train", "--timeout", "nan"], "--timeout nan is not a finite number"),
    (["train", "--hang-timeout", "inf"], "--hang-timeout inf is not a finite number"),
    (["train", "--memory-fraction", "nan"], "--memory-fraction nan is not a finite number"),
    (["train", "--reserve", "nan"], "--reserve nan is not a finite number"),
    (["train", "--batch-size", "100000000"], "--batch-size 100000000 is out of range; valid: 1 to 1048576"),
    (["train", "--seed", "-1"], "--seed -1 is out of range"),
    (["storm", "--threshold-us", "nan"], "--threshold-us nan is not a finite number"),
    (["storm", "--threshold-us", "inf"], "--threshold-us inf is not a finite number"),
    (["sweep", "-f", "nan"], "-f nan is not a finite number"),
    (["sweep", "-f", "inf"], "-f inf is not a finite number"),
    pytest.param(["sweep", "-f", "1.0000001", "-e", "1G"], "makes about 56,763,192 sizes; at most 1000",
                 marks=pytest.mark.timeout(20)),  # the old code spent 25 s building the list, then launched
    (["sweep", "-w", "1000000000"], "-w 1000000000 is out of range"),
    (["sweep", "--min-busbw", "inf"], "--min-busbw inf is not a finite number"),
    (["contention", "--seconds", "nan"], "--seconds nan is not a finite number"),
    (["ceiling", "--bytes", "2000T"], "--bytes 2000T is out of range; valid: 1 byte to 1024T"),
    (["drill", "kill_rank", "--timeout", "inf"], "--timeout inf is not a finite number"),
    (["run", "--stage-deadline", "inf"], "--stage-deadline inf is not a finite number"),
    (["compare", "a.txt", "b.txt", "--tolerance", "nan%"], "--tolerance nan is not a finite number"),
    (["compare", "a.txt", "b.txt", "--tolerance", "inf"], "--tolerance inf is not a finite number"),
]

# With 1 GiB of host memory available (the test says so through the probe), each of these
# needs more before its ranks allocate anything (platform/memory_plan.py; a sweep only when its smallest size does).
# platform/memory_plan.py's words for where the number came from
PLANNED = "available (MemAvailable 1.0 GiB of 32.0 GiB"
TOO_LARGE_FOR_MEMORY = [
    (["ceiling", "--bytes", "1T"], "ceiling-too-large", "--bytes 1T (a source and a destination buffer) needs",
     PLANNED),
    (["storm", "--bytes", str(GiB)], "storm-too-large", f"--bytes {GiB} needs 3.2 GiB of host memory for 2 rank(s)",
     PLANNED),
    (["sweep", "-b", "256M", "-e", "256M"], "sweep-too-large", "-b 268435456 B (the smallest size) needs", PLANNED),
    (["train", "--model", "mlp", "--batch-size", "100000"], "batch-too-large",
     "--batch-size 100000 with --model mlp needs about", "1.0 GiB is free"),
    (["contention", "--size", "16384"], "contention-too-large", "--size 16384 (3 matrices per process) needs",
     PLANNED),
]


@pytest.fixture()
def nothing_starts(monkeypatch, tmp_path):
    """Fails the test if a run directory is created (every launch creates one first) and
    checks that no process was left behind by the command."""
    created = []

    def refuse(cls, base, label):
        created.append(label)
        raise AssertionError(f"a run was started: {label}")

    monkeypatch.setattr(RunDir, "create", classmethod(refuse))
    monkeypatch.chdir(tmp_path)
    yield created
    assert created == []
    assert psutil.Process().children(recursive=True) == []
    assert not (tmp_path / "ddplab-runs").exists()


def _exit(argv) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def _argv_id(value) -> str:
    return " ".join(value) if isinstance(value, list) else ""


@pytest.mark.parametrize("argv, message", NON_FINITE_OR_ABSURD, ids=_argv_id)
def test_non_finite_and_absurd_numbers_exit_2_before_anything_starts(nothing_starts, capsys, argv, message):
    assert _exit(argv) == 2
    err = capsys.readouterr().err
    assert message in err, err


@pytest.mark.parametrize("argv, reference, message, available", TOO_LARGE_FOR_MEMORY, ids=_argv_id)
def test_buffers_larger_than_the_memory_exit_2_before_anything_starts(nothing_starts, capsys, monkeypatch, argv,
                                                                      reference, message, available):
    probe_module = importlib.import_module("ddplab.platform.probe")
    monkeypatch.setattr(probe_module, "host_memory", lambda: (32 * GiB, 1 * GiB))
    assert _exit(argv) == 2
    err = capsys.readouterr().err
    assert f"error: {reference}" in err and message in err and available in err, err


def test_a_real_process_refuses_timeout_inf_with_exit_2(tmp_path):
    proc = run_cli("train", "--timeout", "inf", "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--timeout inf is not a finite number" in proc.stderr
    assert not (tmp_path / "run").exists()
