"""`ddplab launch --ras` for real, on CPU: a gloo job hangs (examples/user_deadlock.py), the watcher declares
it, and a fake RAS service on a free loopback port (the job's NCCL_RAS_ADDR) is asked, or not.

The machine is described to the launcher as one whose collective library has the service
(tests/integration/ras_launcher.py); the ranks, the watcher and the report are the real ones.
"""

import markupsafe
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import load_json, processes_with_env
from tests.ras_fake import ANSWER, FakeRas

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = Path(__file__).resolve().parent / "ras_launcher.py"
HANG_TIMEOUT_S = 4


def hang_job(tmp_path: Path, server: FakeRas, *ddplab: str, version: str = "2.29.7") -> tuple[int, dict, str]:
    out = tmp_path / "job"
    done = subprocess.run([sys.executable, str(LAUNCHER), version, "--nproc-per-node", "2", "--hang-timeout",
                           str(HANG_TIMEOUT_S), "--out", str(out), *ddplab, "--",
                           str(ROOT / "examples" / "user_deadlock.py"), "--steps", "6"],
                          capture_output=True, text=True, timeout=180, cwd=tmp_path,
                          env=dict(os.environ, PYTHONUNBUFFERED="1", NCCL_RAS_ADDR=server.address))
    doc = load_json(out / "report.json")
    assert processes_with_env("DDPLAB_RUN_ID", doc["results"]["run_id"]) == []
    assert doc["results"]["outcome"] == "hung" and doc["results"]["culprit"]["ranks"] == [1], done.stdout[-3000:]
    return done.returncode, doc, (out / "report.html").read_text()


def test_the_services_answer_lands_in_the_report_and_its_page(tmp_path):
    with FakeRas("answers") as server:
        rc, doc, page = hang_job(tmp_path, server, "--ras")
    assert rc == 1 and doc["config"]["ras"] is True
    ras = doc["results"]["hang"]["ras"]
    assert (ras["service"], ras["status"], ras["format"], ras["address"]) == ("NCCL RAS", "answered", "json",
                                                                              server.address)
    assert ras["answer"] == ANSWER
    assert ras["sent"] == server.lines == ["CLIENT PROTOCOL 2", "SET FORMAT json", "VERBOSE STATUS"]
    assert server.connections == 1
    assert str(markupsafe.escape(ANSWER.strip())) in page and "<b>&amp;</b>" not in page  # escaped, once


def test_a_service_that_never_answers_holds_the_teardown_up_only_briefly(tmp_path):
    with FakeRas("silent") as server:
        rc, doc, _ = hang_job(tmp_path, server, "--ras")
    results = doc["results"]
    ras = results["hang"]["ras"]
    assert rc == 1 and (ras["status"], ras["answer"]) == ("no answer", "")
    # What it held the teardown up for: the handshake's timeout (2 s), told apart from the service's own 10 s. (Not
    # the job's wall time, which holds two ranks' start-up on a busy machine.)
    assert ras["seconds"] < 6
    started = results["hang"]["declared_at"] - results["hang"]["no_progress_s"]
    assert results["detected_at"] - started <= HANG_TIMEOUT_S + 5


def test_without_the_flag_nothing_connects(tmp_path):
    with FakeRas("answers") as server:
        rc, doc, _ = hang_job(tmp_path, server)
    assert rc == 1 and doc["config"]["ras"] is False
    assert "ras" not in doc["results"]["hang"]
    assert (server.connections, server.lines) == (0, [])
