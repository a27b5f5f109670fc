"""Bad input: exit 2, a message naming the value and the choices, and nothing started."""

import pytest

from ddplab.cli import main
from tests.conftest import run_cli

BAD = [
    (["train", "--nproc", "0"], "--nproc 0"),
    (["train", "--nproc", "1000"], "1 to 64"),
    (["train", "--nproc", "two"], "--nproc 'two' is not a whole number written with the digits 0-9"),
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


# Inputs that made ddplab itself fail (exit 70), or that it read as something else: other scripts' digits (int()
# reads "٢" as 2; "²" passes str.isdigit() and then fails int()), Python's "1_0", empty words that silently meant
# "not given", paths no file can have, and a device as an output file (the atomic rename would replace it).
ODD = [
    (["train", "--nproc", "٢"], "--nproc '٢' is not a whole number written with the digits 0-9"),
    (["train", "--nproc", "²"], "--nproc '²' is not a whole number written with the digits 0-9"),
    (["train", "--steps", "1_0"], "--steps '1_0' is not a whole number"),
    (["train", "--timeout", "0x10"], "--timeout '0x10' is not a number written with the digits 0-9"),
    (["train", "--steps", "9" * 100], "--steps 99999999999999999999... (100 characters) is too long for a whole number"),
    (["train", "--rdzv-host", ""], "--rdzv-host '' is empty"),
    (["train", "--run-dir", ""], "--run-dir '' is empty; give a path, or leave --run-dir out"),
    (["train", "--run-dir", "x" * 300], "is too long: a name of 300 bytes"),
    (["train", "--json", ""], "--json '' is empty"),
    (["train", "--json", "/dev/null"], "--json /dev/null exists and is not a regular file"),
    (["run", "--out", ""], "--out '' is empty"),
    (["sweep", "-e", "٢G"], '-e/--maxbytes "٢G" is not a size'),
    (["sweep", "-f", "٢"], "-f '٢' is not a number"),
    (["compare", "a.txt", "b.txt", "--tolerance", "٥%"], '--tolerance "٥%" is not a percentage'),
    (["clean", "--pid", "٢"], "--pid '٢' is not a whole number"),
    (["report", "r.json", "--out", ""], "--out '' is empty"),
]


@pytest.mark.parametrize("argv, fragment", ODD, ids=[" ".join(a)[:60] for a, _ in ODD])
def test_odd_input_exits_2_naming_the_value(argv, fragment, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert _exit_code(argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert fragment in err, err
    assert not (tmp_path / "ddplab-runs").exists()


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
    # other scripts' digits, ports and node ranks no socket has, paths no directory can be made at
    (["--nproc-per-node", "²"], "--nproc-per-node ²: valid values are a whole number or one of torchrun's"),
    (["--nproc-per-node", "٢"], "--nproc-per-node ٢: valid values are a whole number"),
    (["--max-restarts", "٢"], "--max-restarts '٢' is not a whole number written with the digits 0-9"),
    (["--master-port", "70000"], "--master-port 70000 is out of range; valid: 0 to 65535"),
    (["--node-rank", "-1"], "--node-rank -1 is out of range"),
    (["--nnodes", "٢"], "--nnodes '٢': valid forms are N or MIN:MAX"),
    (["--nnodes", "1:99999999"], "--nnodes '1:99999999': valid forms are N or MIN:MAX"),
    (["--rdzv-endpoint", "localhost:٢٩٤٠٠"], "the port '٢٩٤٠٠' is not a whole number written with the digits 0-9"),
    (["--log-dir", "/proc/ddplab-test"], "--log-dir /proc/ddplab-test cannot be written"),
    (["--log-dir", ""], "--log-dir '' is empty"),
    (["--out", ""], "--out '' is empty"),
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


def test_a_port_clash_says_why_and_claims_no_port(tmp_path):
    """The port --master-port names is taken: the terminal says so (it said "LAUNCHER-ERROR in 0.0 s" alone, the
    reason in report.json only) and nothing claims the job listened there."""
    import json
    import socket

    (tmp_path / "train.py").write_text("open('ran', 'w').close()\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_cli("launch", "--rdzv-backend", "static", "--master-port", str(port), "--out", str(tmp_path / "job"),
                       "--", "train.py", cwd=tmp_path, timeout=90)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"launcher error: cannot listen on 127.0.0.1:{port}: [Errno 98] Address already in use" in proc.stdout
    assert "listened" not in proc.stdout and not (tmp_path / "ran").exists()
    results = json.loads((tmp_path / "job" / "report.json").read_text())["results"]
    assert results["outcome"] == "launcher-error" and results.get("listen") is None, results
