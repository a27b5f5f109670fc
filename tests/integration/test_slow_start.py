"""A rank still importing its code is slow, not hung (supervision/watcher.py): under `ddplab launch` with a hang
timeout of 2 s, rank 1 spends 6 s in an import while rank 0 waits in init_process_group, and the job passes. A rank
that sleeps as long in its own code before init is late, and is named (the late-rank drill; the same script here)."""

import pytest

from tests.conftest import load_json, run_cli

pytestmark = pytest.mark.slow

SCRIPT = """\
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if os.environ["RANK"] == "1":
    if sys.argv[1] == "import":
        import heavy_module  # noqa: F401  (6 s at import, as `import torch` on a busy machine)
    else:
        time.sleep(6)
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
dist.all_reduce(torch.ones(4))
dist.destroy_process_group()
"""


def _launch(tmp_path, how: str) -> tuple[int, dict]:
    (tmp_path / "heavy_module.py").write_text("import time\n\ntime.sleep(6)\n")
    (tmp_path / "job.py").write_text(SCRIPT)
    out = tmp_path / f"out-{how}"
    done = run_cli("launch", "--nproc-per-node", "2", "--hang-timeout", "2", "--out", str(out), "--",
                   str(tmp_path / "job.py"), how, cwd=tmp_path, timeout=180)
    return done.returncode, load_json(out / "report.json")


def test_a_rank_slow_in_its_imports_is_not_hung(tmp_path):
    code, doc = _launch(tmp_path, "import")
    assert (code, doc["results"]["outcome"], doc["results"]["hang"]) == (0, "succeeded", None), doc["results"]


def test_a_rank_as_slow_in_its_own_code_before_init_is_late(tmp_path):
    code, doc = _launch(tmp_path, "sleep")
    assert code == 1 and doc["results"]["hang"] is not None
    assert doc["results"]["culprit"]["ranks"] == [1] and "never reached init" in doc["results"]["culprit"]["reason"]
