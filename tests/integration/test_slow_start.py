"""A rank still importing its code is slow, not hung, while its import moves (supervision/watcher.py): under
`ddplab launch` with a hang timeout of 2 s, rank 1 spends 6 s importing a package of many slow modules (as
`import torch` on a busy machine) while rank 0 waits in init_process_group, and the job passes. An import that
stops moving is where a rank is stuck, and is named within the hang timeout: the fault table's "hung in an import"
row; a rank that sleeps in its own code before init is late: its "late" row (tests/integration/test_fault_table.py).
"""

import pytest

from tests.conftest import load_json, run_cli

pytestmark = pytest.mark.slow

SCRIPT = """\
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if os.environ["RANK"] == "1":
    import heavy  # noqa: F401  (6 s of imports, 0.2 s each, as `import torch` on a busy machine)
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
dist.all_reduce(torch.ones(4))
dist.destroy_process_group()
"""


def test_a_rank_slow_in_its_imports_is_not_hung(tmp_path):
    package = tmp_path / "heavy"
    package.mkdir()
    (package / "__init__.py").write_text("".join(f"from . import part{i}\n" for i in range(30)))
    for i in range(30):
        (package / f"part{i}.py").write_text("import time\n\ntime.sleep(0.2)\n")
    (tmp_path / "job.py").write_text(SCRIPT)
    done = run_cli("launch", "--nproc-per-node", "2", "--hang-timeout", "2", "--out", str(tmp_path / "out"), "--",
                   str(tmp_path / "job.py"), cwd=tmp_path, timeout=180)
    results = load_json(tmp_path / "out" / "report.json")["results"]
    assert (done.returncode, results["outcome"], results["hang"]) == (0, "succeeded", None), results
