"""`ddplab launch` keeps its report's keys across the redesign (issue 11): the report of the command that
generated keys.json's "launch" entry, a skipped collective found by two gloo ranks on CPU."""

import json
from pathlib import Path

import pytest

from tests.conftest import processes_with_env, run_cli
from tests.golden.test_json_keys import assert_keys_kept

pytestmark = pytest.mark.slow
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_launch_keeps_its_json_keys(tmp_path):
    out = tmp_path / "job"
    done = run_cli("launch", "--nproc-per-node", "2", "--hang-timeout", "5", "--out", str(out), "--",
                   str(EXAMPLES / "skipped_collective.py"), timeout=180, cwd=tmp_path)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    doc = json.loads((out / "report.json").read_text())
    assert_keys_kept("launch", doc)
    assert processes_with_env("DDPLAB_RUN_ID", doc["results"]["run_id"]) == []
