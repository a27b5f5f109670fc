"""scripts/torch_matrix.py (the torch matrix and CI's compatibility check): what it judges and how it tabulates.
The real runs are in docs/RESULTS.md; here the script's own logic, on crafted results."""

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "torch_matrix.py"


@pytest.fixture(scope="module")
def matrix():
    return load_script("torch_matrix")


def _release(torch="2.4.1+cu121", culprit=(1,), run_verdict="pass", loopback=True):
    return {"requested": torch.split("+")[0], "torch": torch, "cuda_build": "12.1", "gloo_flight_recorder": False,
            "install_s": 64.2, "venv_mb": 5100,
            "run": {"exit_code": 0, "verdict": run_verdict, "wall_s": 15.4, "loopback_only": loopback},
            "launch": {"skipped_collective": {"exit_code": 1, "outcome": "failed", "wall_s": 4.1, "culprit": list(culprit),
                                              "kind": "raised"}},
            "checks": {"run passed": run_verdict == "pass", "culprit": list(culprit) == [1]}, "ok": True}


def test_the_table_has_a_row_per_release_and_says_a_wrong_culprit(matrix):
    summary = {"results": [_release(), _release("2.13.0+cpu", culprit=(0,)),
                           {"requested": "2.3.1", "refused_below_floor": True, "exit_code": 3, "checks": {},
                            "said": "error: torch-unsupported\n  torch 2.3.1 is installed, older than torch 2.4, "
                                    "the oldest ddplab supports."}]}
    summary["results"][1]["cuda_build"] = None
    lines = matrix.markdown_table(summary).splitlines()
    assert lines[0] == "| torch (build) | install | gloo FR | `ddplab run` quick | launch `skipped_collective` |"
    assert lines[2] == ("| 2.4.1+cu121 (CUDA 12.1) | 64 s, 5.1 GB | no | PASS in 15 s, loopback only | "
                        "failed in 4 s, culprit [1] (right, raised) |")
    assert "2.13.0+cpu (CPU)" in lines[3] and "culprit [0] (WRONG, raised)" in lines[3]
    assert lines[4].startswith("| 2.3.1 (below the floor) | no deps | - | exit 3: torch 2.3.1 is installed")


def test_a_command_that_never_ends_is_said_and_the_other_checks_still_run(matrix, tmp_path):
    release = _release()
    release["run"].update(exit_code=None, verdict=None, did_not_end_in_s=300, last_stage_started="storm")
    release["launch"]["skipped_collective"]["exit_code"] = None
    row = matrix.markdown_table({"results": [release]}).splitlines()[2]
    assert "did not end in 300 s (stuck in stage storm)" in row and "did not end in 120 s" in row
    proc = matrix._run_bounded([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(30)"],
                               tmp_path, 2)
    assert proc.returncode is None and "ended after 2 s" in proc.stderr


def test_every_store_of_a_lab_run_counts_for_loopback_only(matrix):
    doc = {"results": {"stages": [{"report": {"results": {"listen": {"loopback_only": True}}}},
                                  {"report": {"results": {"drills": [{"session": {"listen": {"loopback_only": False}}}]}}}]}}
    assert [lst["loopback_only"] for lst in matrix._find(doc, "listen")] == [True, False]


@pytest.mark.parametrize(("ok", "strict", "code"), [(True, True, 0), (False, True, 1), (False, False, 0)])
def test_strict_fails_the_command_when_a_release_failed_a_check(matrix, monkeypatch, tmp_path, ok, strict, code):
    monkeypatch.setattr(matrix, "one_release", lambda version, root, args, deadline: {**_release(), "ok": ok})
    out = tmp_path / "m.json"
    argv = ["--torch", "2.4.1", "--root", str(tmp_path), "--json", str(out)] + (["--strict"] if strict else [])
    assert matrix.main(argv) == code
    summary = json.loads(out.read_text())
    assert summary["ok"] is ok and summary["expected_culprit"] == [1] and summary["results"][0]["torch"] == "2.4.1+cu121"
    assert {"commit", "branch", "dirty"} <= set(summary["checkout"])
