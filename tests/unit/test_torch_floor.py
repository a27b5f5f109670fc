"""The oldest torch ddplab supports: declared once, checked before any command that needs torch starts."""

import re
import tomllib
from pathlib import Path

import pytest

from ddplab import commands
from ddplab.basics import torch_floor
from ddplab.cli import main
from ddplab.errors import EnvironmentUnsupported, ExitCode

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_declares_the_floor_the_code_enforces():
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert [d for d in dependencies if d.startswith("torch")] == [f"torch>={torch_floor.FLOOR_TEXT}"]


def test_ci_checks_a_release_of_the_floor():
    """scripts/compat.sh (run by .ci/run) installs the oldest supported torch, not some other one."""
    script = (ROOT / "scripts" / "compat.sh").read_text()
    versions = set(re.findall(r'COMPAT_TORCH:-([0-9.]+)', script))
    assert len(versions) == 1 and torch_floor.release(versions.pop()) == torch_floor.FLOOR
    assert "scripts/compat.sh" in (ROOT / ".ci" / "run").read_text()


@pytest.mark.parametrize(("version", "found"), [
    ("2.5.1", (2, 5)), ("2.5.1+cu124", (2, 5)), ("2.6.0a0+ecf3bae40a", (2, 6)), ("2.13.0+cpu", (2, 13)),
    ("10.0", (10, 0)), ("nightly", None), ("", None),
])
def test_a_version_is_read_as_its_release(version, found):
    assert torch_floor.release(version) == found


def test_the_floor_and_after_are_supported_a_pre_release_of_the_floor_included():
    major, minor = torch_floor.FLOOR
    for version in (f"{major}.{minor}.0", f"{major}.{minor}.1+cu121", f"{major}.{minor}.0a0+git1234",
                    f"{major}.{minor + 1}.0", f"{major + 1}.0.0"):
        assert torch_floor.unsupported(version) is None, version


def test_an_older_torch_is_refused_in_one_sentence_naming_both_versions():
    major, minor = torch_floor.FLOOR
    older = f"{major}.{minor - 1}.1+cu121"
    reason = torch_floor.unsupported(older)
    assert reason == f"torch {older} is installed, older than torch {major}.{minor}, the oldest ddplab supports."
    assert reason.count(".") - older.count(".") - 1 == 1  # one sentence: the floor's own dot, then the full stop
    assert torch_floor.unsupported(None) == f"torch is not installed here; ddplab needs torch {major}.{minor} or newer."
    assert "cannot read" in torch_floor.unsupported("nightly")
    with pytest.raises(EnvironmentUnsupported) as caught:
        torch_floor.require_supported(older)
    assert caught.value.exit_code == ExitCode.ENVIRONMENT and caught.value.reference == "torch-unsupported"


def test_this_torch_is_supported():
    assert torch_floor.installed_version() is not None
    torch_floor.require_supported()


def test_a_command_that_needs_torch_refuses_an_old_one_before_it_starts(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(torch_floor, "installed_version", lambda: "2.3.1")
    out = tmp_path / "run"
    assert main(["run", "--out", str(out)]) == ExitCode.ENVIRONMENT
    err = capsys.readouterr().err
    assert err == (f"error: torch-unsupported\n  torch 2.3.1 is installed, older than torch {torch_floor.FLOOR_TEXT}, "
                   "the oldest ddplab supports.\n")
    assert not out.exists()  # nothing started
    assert main(["launch", "--nproc-per-node", "2", "--", "train.py"]) == ExitCode.ENVIRONMENT


def test_commands_that_only_read_files_run_beside_any_torch(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(torch_floor, "installed_version", lambda: None)
    assert set(commands.WITHOUT_TORCH) == {"compare", "report", "clean"}
    missing = tmp_path / "missing.json"
    assert main(["report", str(missing)]) == ExitCode.USAGE  # its own error, not the torch one
    assert "torch" not in capsys.readouterr().err
