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
