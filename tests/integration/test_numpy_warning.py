"""A Python without numpy (Debian's system Python): torch's "Failed to initialize NumPy: No module named 'numpy'"
is no finding for ddplab and is not shown; a numpy that is there but broken still is (basics/numpy_warning.py).

numpy is made unimportable in a fresh interpreter by a meta path finder, which is how torch's own import of it
fails on such a Python (the control case shows torch warning)."""

import subprocess
import sys
import textwrap

import pytest

from ddplab.basics import numpy_warning

pytestmark = pytest.mark.slow

WITHOUT_NUMPY = textwrap.dedent("""
    import sys
    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if name == "numpy" or name.startswith("numpy."):
                raise ModuleNotFoundError({error!r}, name="numpy")
    sys.meta_path.insert(0, Refuse())
""")
MISSING = "No module named 'numpy'"
BROKEN = "numpy.core.multiarray failed to import"


def _python(error: str, then: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT_NUMPY.format(error=error) + then], capture_output=True,
                          text=True, timeout=120)


def test_torch_warns_without_numpy_and_ddplab_does_not_show_it():
    control = _python(MISSING, "import torch")
    assert numpy_warning.MESSAGE in control.stderr, "the control should show torch's warning"

    env = _python(MISSING, "from ddplab.cli import main\nsys.exit(main(['env']))")
    assert env.returncode in (0, 1), env.stdout + env.stderr
    assert "Failed to initialize NumPy" not in env.stdout + env.stderr
    assert "torch" in env.stdout  # the doctor ran and imported torch


def test_a_broken_numpy_is_still_shown():
    env = _python(BROKEN, "from ddplab.basics import numpy_warning\nnumpy_warning.ignore_in_this_process()\n"
                          "import torch")
    assert f"Failed to initialize NumPy: {BROKEN}" in env.stderr


def test_ranks_get_the_filter_beside_the_users_own():
    assert numpy_warning.for_ranks(None) == "ignore:Failed to initialize NumPy:UserWarning"
    mine = "error::DeprecationWarning"
    assert numpy_warning.for_ranks(mine) == f"{mine},ignore:Failed to initialize NumPy:UserWarning"
    assert numpy_warning.for_ranks(numpy_warning.for_ranks(mine)) == numpy_warning.for_ranks(mine)
    ranks = subprocess.run([sys.executable, "-c", WITHOUT_NUMPY.format(error=MISSING) + "import torch"],
                           capture_output=True, text=True, timeout=120,
                           env={"PYTHONWARNINGS": numpy_warning.for_ranks(None), "PATH": "/usr/bin:/bin"})
    assert ranks.returncode == 0 and "Failed to initialize NumPy" not in ranks.stderr, ranks.stderr
