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


# Each test's job: its service's behaviour and whether ddplab is asked to query it. The three jobs run side by side
# (each hung job mostly waits out its hang timeout), each with its own service on its own port.
JOBS = {"answers": ("answers", "--ras"), "silent": ("silent", "--ras"), "no flag": ("answers",)}


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """name -> (the launcher's exit code, its report, its page, the service as the job left it)."""
    out = tmp_path_factory.mktemp("ras")
    with FakeRas("answers") as answers, FakeRas("silent") as silent, FakeRas("answers") as unasked:
        servers = {"answers": answers, "silent": silent, "no flag": unasked}
        started: dict[str, tuple[subprocess.Popen, Path]] = {}
        outputs: dict[str, str] = {}
        try:
            for name, (_, *flags) in JOBS.items():
                started[name] = _start_hang_job(out / name.replace(" ", "-"), servers[name], *flags)
            for name, (job, _) in started.items():
                outputs[name] = job.communicate(timeout=180)[0]
        finally:  # every job started, however the waits above ended (a launcher's ranks follow it: parent-death)
            for job, _ in started.values():
                job.kill()
                job.wait()
    return {name: (*_judged(job, report_dir, outputs[name]), servers[name])
            for name, (job, report_dir) in started.items()}


def _start_hang_job(folder: Path, server: FakeRas, *ddplab: str) -> tuple[subprocess.Popen, Path]:
    folder.mkdir()
    job = subprocess.Popen([sys.executable, str(LAUNCHER), "2.29.7", "--nproc-per-node", "2", "--hang-timeout",
                            str(HANG_TIMEOUT_S), "--out", str(folder / "job"), *ddplab, "--",
                            str(ROOT / "examples" / "user_deadlock.py"), "--steps", "6"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=folder,
                           env=dict(os.environ, PYTHONUNBUFFERED="1", NCCL_RAS_ADDR=server.address))
    return job, folder / "job"


def _judged(job: subprocess.Popen, out: Path, output: str) -> tuple[int, dict, str]:
    """What every job must show: declared hung, rank 1 named, nothing of it left."""
    doc = load_json(out / "report.json")
    assert processes_with_env("DDPLAB_RUN_ID", doc["results"]["run_id"]) == []
    assert doc["results"]["outcome"] == "hung" and doc["results"]["culprit"]["ranks"] == [1], output[-3000:]
    return job.returncode, doc, (out / "report.html").read_text()


def test_the_services_answer_lands_in_the_report_and_its_page(jobs):
    rc, doc, page, server = jobs["answers"]
    assert rc == 1 and doc["config"]["ras"] is True
    ras = doc["results"]["hang"]["ras"]
    assert (ras["service"], ras["status"], ras["format"], ras["address"]) == ("NCCL RAS", "answered", "json",
                                                                              server.address)
    assert ras["answer"] == ANSWER
    assert ras["sent"] == server.lines == ["CLIENT PROTOCOL 2", "SET FORMAT json", "VERBOSE STATUS"]
    assert server.connections == 1
    assert str(markupsafe.escape(ANSWER.strip())) in page and "<b>&amp;</b>" not in page  # escaped, once


def test_a_service_that_never_answers_holds_the_teardown_up_only_briefly(jobs):
    rc, doc, _, _ = jobs["silent"]
    results = doc["results"]
    ras = results["hang"]["ras"]
    assert rc == 1 and (ras["status"], ras["answer"]) == ("no answer", "")
    # What it held the teardown up for: the handshake's timeout (2 s), told apart from the service's own 10 s. (Not
    # the job's wall time, which holds two ranks' start-up on a busy machine.)
    assert ras["seconds"] < 6
    started = results["hang"]["declared_at"] - results["hang"]["no_progress_s"]
    assert results["detected_at"] - started <= HANG_TIMEOUT_S + 5


def test_without_the_flag_nothing_connects(jobs):
    rc, doc, _, server = jobs["no flag"]
    assert rc == 1 and doc["config"]["ras"] is False
    assert "ras" not in doc["results"]["hang"]
    assert (server.connections, server.lines) == (0, [])
