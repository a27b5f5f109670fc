"""Bad input: exit 2, a message naming the value and the choices, and nothing started."""

import pytest

from ddplab.cli import main
from tests.conftest import run_cli

BAD = [
    (["train", "--nproc", "0"], "--nproc 0"),
    (["train", "--nproc", "1000"], "1 to 64"),
    (["train", "--nproc", "two"], "invalid int value: 'two'"),
    (["train", "--memory-fraction", "0"], "0 < fraction <= 1"),
    (["train", "--memory-fraction", "1.5"], "--memory-fraction 1.5"),
    (["train", "--nproc", "2", "--share-device", "--memory-fraction", "0.6"], "= 1.20 of its memory"),
    (["train", "--device", "gpu"], 'unknown device "gpu"'),
    (["train", "--backend", "ncll"], 'maybe you meant "nccl"'),
    (["train", "--per-device", "--nproc", "2"], "--per-device with --nproc 2 needs 2 devices"),
    (["train", "--steps", "0"], "--steps 0"),
    (["train", "--model", "resnet"], 'unknown model "resnet"'),
    (["train", "--share-device", "--per-device"], "not allowed with argument"),
    (["env", "--device", "tpu"], 'unknown device "tpu"'),
    (["run", "--nproc", "-1"], "--nproc -1"),
    (["run", "--only", "storm,swep"], 'unknown stage kind "swep" - maybe you meant "sweep"; valid choices: train, storm'),
    (["trian"], 'maybe you meant "train"'),
]


@pytest.mark.parametrize("argv, fragment", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_exits_2_before_starting_anything(argv, fragment, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err
    assert fragment in err
    assert not (tmp_path / "ddplab-runs").exists()  # no run directory: nothing was launched


def _exit_code(argv) -> int:
    """main()'s return value, or the code argparse exits with for its own errors."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def test_real_process_exit_code_is_2(tmp_path):
    proc = run_cli("train", "--nproc", "0", cwd=tmp_path)
    assert proc.returncode == 2
    assert "error: invalid-nproc" in proc.stderr
    assert not (tmp_path / "ddplab-runs").exists()


# `ddplab launch` checks torchrun's options as every other command checks its own (issue 18): before these
# checks, 10000 ranks started spawning, a monitor interval of 0 ended in an empty AssertionError, an unknown
# rendezvous backend was found out after the job directory existed, and a hang timeout of inf ran.
LAUNCH_BAD = [
    (["--nproc-per-node", "10000"], "--nproc-per-node 10000 is out of range; valid: 1 to 64 ranks per node"),
    (["--monitor-interval", "0"], "--monitor-interval 0.0 is out of range; valid: 0 < seconds <= 86400"),
    (["--monitor-interval", "-1"], "--monitor-interval -1.0 is out of range; valid: 0 < seconds <= 86400"),
    (["--rdzv-backend", "bogus"], "--rdzv-backend bogus: valid backends are c10d, etcd, etcd-v2, static"),
    (["--hang-timeout", "inf"], "--hang-timeout inf is not a finite number; valid: 0 <= seconds <= 86400"),
]


@pytest.mark.parametrize("options, message", LAUNCH_BAD, ids=[" ".join(o) for o, _ in LAUNCH_BAD])
def test_launch_refuses_bad_options_before_any_process_starts(options, message, tmp_path, monkeypatch, capsys):
    import psutil

    from ddplab.job import run as job_run

    def started(*args, **kwargs):
        raise AssertionError("a process was started")

    # Not subprocess.Popen: a module imported for the first time while it was patched kept the fake for good,
    # and every later launch in this test process failed. Whether a process started is read from the OS.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(job_run, "run_user_job", started)
    (tmp_path / "train.py").write_text("open('ran', 'w').close()\n")
    children = {p.pid for p in psutil.Process().children(recursive=True)}
    assert _exit_code(["launch", *options, "--", "train.py"]) == 2
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= children, "a process was started"
    err = capsys.readouterr().err
    assert message in " ".join(err.split())  # the console wraps long lines
    assert not (tmp_path / "ddplab-runs").exists() and not (tmp_path / "ran").exists()


def test_launch_real_process_exit_code_is_2(tmp_path):
    (tmp_path / "train.py").write_text("open('ran', 'w').close()\n")
    proc = run_cli("launch", "--nproc-per-node", "10000", "--", "train.py", cwd=tmp_path, timeout=60)
    assert proc.returncode == 2
    assert "error: invalid-nproc-per-node" in proc.stderr and "--nproc-per-node 10000" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]  # no job directory, no rank ran


def _commands_with_json() -> list[str]:
    import argparse

    from ddplab.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return [name for name, parser in sub.choices.items()
            if any("--json" in a.option_strings for a in parser._actions)]


FIXTURE = "tests/fixtures/all_reduce_perf_2xH200_nccl2.28.9.txt"
# What each command needs besides --json to get as far as the output check.
REQUIRED = {"compare": [FIXTURE, FIXTURE], "drill": ["kill_rank"],
            "pairwise": ["--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:29400"]}


@pytest.mark.parametrize("command", _commands_with_json())
def test_a_json_path_in_a_missing_directory_is_refused_not_created(command, tmp_path, monkeypatch, capsys):
    """Issue 18: `train --json /nonexistent/dir/x.json` created /nonexistent/dir. Every command's --json goes
    through the one check (files.check_output_file, from cli.py) before it runs anything."""
    from pathlib import Path

    from ddplab import commands

    def ran(*args, **kwargs):
        raise AssertionError(f"ddplab {command} ran")

    root = Path(__file__).resolve().parents[2]
    monkeypatch.setattr(commands.load(command), "main", ran)
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "nonexistent" / "dir" / "x.json"
    needs = [str(root / a) if a == FIXTURE else a for a in REQUIRED.get(command, [])]
    argv = [command, *needs, "--json", str(target)]
    assert _exit_code(argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "error: output-directory-missing" in err
    assert f"--json {target}: the directory {target.parent} does not exist" in err
    assert not (tmp_path / "nonexistent").exists() and not (tmp_path / "ddplab-runs").exists()


def test_train_json_in_a_missing_directory_exits_2_in_a_real_process(tmp_path):
    target = tmp_path / "nonexistent" / "dir" / "x.json"
    proc = run_cli("train", "--json", str(target), cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "error: output-directory-missing" in proc.stderr and str(target.parent) in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no directory made, no run started
