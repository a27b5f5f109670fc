"""The README's two commands install into a virtual environment, never into the system Python (PEP 668)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _dry_run(target: str, **env) -> str:
    environ = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHON")}
    environ.update(env)
    return subprocess.run(["make", "-n", target], cwd=ROOT, env=environ, capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.parametrize("target", ["lab", "test"])
def test_without_an_active_environment_the_project_venv_is_used(target):
    out = _dry_run(target)
    venv_python = str(ROOT / ".venv" / "bin" / "python")
    assert f'setup.sh "{venv_python}"' in out
    assert f'"{venv_python}" -m' in out
    assert "python3 -m" not in out  # the system interpreter is never asked to install or run


def test_an_active_virtual_environment_is_used(tmp_path):
    out = _dry_run("lab", VIRTUAL_ENV=str(tmp_path))
    assert f'"{tmp_path}/bin/python" -m ddplab run' in out
