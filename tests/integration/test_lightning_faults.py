"""Real third-party training code: a PyTorch Lightning DDP run on CPU (tests/thirdparty/lightning_ddp.py) under
`ddplab launch`, with a stall in a callback, an exception and a hard exit on rank 1 of 2 (issue 17). Each is
judged right: the culprit rank and kind, detected within the hang timeout + 5 s, nothing left running."""

import re
from pathlib import Path

import pytest

from tests.conftest import load_json, processes_with_env, run_cli

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[1] / "thirdparty" / "lightning_ddp.py"
HANG_TIMEOUT_S = 5
FAULT_AT = re.compile(r"\] injecting fault: .* at (\d+\.\d+)")
# fault -> (outcome, culprit kind)
CASES = {"stall": ("hung", ("behind", "not-in-collective")), "raise": ("failed", ("raised",)),
         "exit": ("failed", ("died",))}


@pytest.mark.parametrize("fault", sorted(CASES))
def test_a_lightning_job_with_a_broken_rank_is_judged_right(tmp_path, fault):
    pytest.importorskip("lightning", reason="the test extras install it (pyproject.toml)")
    out = tmp_path / "job"
    done = run_cli("launch", "--nproc-per-node", "2", "--hang-timeout", str(HANG_TIMEOUT_S), "--out", str(out), "--",
                   str(SCRIPT), "--fault", fault, timeout=240, cwd=tmp_path)
    results = load_json(out / "report.json")["results"]
    outcome, kinds = CASES[fault]
    assert done.returncode == 1 and results["outcome"] == outcome, done.stdout[-3000:]
    assert results["culprit"]["ranks"] == [1] and results["culprit"]["kind"] in kinds, results["culprit"]
    fault_at = float(FAULT_AT.search(done.stdout).group(1))
    assert results["detected_at"] - fault_at <= HANG_TIMEOUT_S + 5
    assert results["left_running"] == [] and processes_with_env("DDPLAB_RUN_ID", results["run_id"]) == []
