"""`ddplab launch -- train.py --api-key X ...`: the job runs with its arguments as typed, and no secret among them
reaches report.json, report.html or the terminal, nor through a process the job left running, which ddplab ends
and names by its program only (redaction.py, supervision/job.py)."""

import json

import psutil
import pytest

from tests.conftest import load_json, run_cli

pytestmark = pytest.mark.slow

# Fake values with real credentials' shapes, and plain secrets behind secret-named flags.
SECRETS = {
    "api_key": "plain-api-key-0001",
    "token": "plain-token-0002",
    "hf": "hf_FakeHuggingFaceToken0003xyz",
    "openai": "sk-proj-FakeOpenAiKey0004abcdefgh",
    "github": "ghp_FakeGitHubToken0005abcdefghijklmnop",
    "db_password": "pl4in-db-pw-0006",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJmYWtlLTAwMDcifQ.ZmFrZS1zaWduYXR1cmUtMDAwNw",
}
SCRIPT_ARGS = ["--api-key", SECRETS["api_key"], f"--token={SECRETS['token']}", "--model", SECRETS["hf"],
               SECRETS["openai"], f"--github={SECRETS['github']}",
               f"--db=postgres://alice:{SECRETS['db_password']}@db.example:5432/runs", "--header",
               f"Authorization: Bearer {SECRETS['jwt']}", "--tokenizer", "gpt2", "--epochs", "3"]
# Each rank records the arguments it was given; rank 0 leaves a process carrying some of them running (in a session
# of its own), so that the report's ended_after[] names a process whose command line holds them.
SCRIPT = """import json, os, subprocess, sys
import torch.distributed as dist
dist.init_process_group("gloo")
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "argv-" + os.environ["RANK"] + ".json")
with open(out, "w") as f:
    json.dump(sys.argv[1:], f)
if dist.get_rank() == 0:
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *sys.argv[1:6]],
                              start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out + ".helper", "w") as f:
        f.write(str(helper.pid))
dist.barrier()
dist.destroy_process_group()
"""


def test_secret_arguments_reach_the_job_but_not_its_report(tmp_path):
    script, out = tmp_path / "show_argv.py", tmp_path / "job"
    script.write_text(SCRIPT)
    helper = None
    try:
        done = run_cli("launch", "--nproc-per-node", "2", "--hang-timeout", "30", "--out", str(out), "--",
                       str(script), *SCRIPT_ARGS, timeout=180, cwd=tmp_path)
        helper_file = tmp_path / "argv-0.json.helper"
        helper = int(helper_file.read_text()) if helper_file.exists() else None

        for rank in (0, 1):  # the job ran with its arguments as typed
            assert json.loads((tmp_path / f"argv-{rank}.json").read_text()) == SCRIPT_ARGS, done.stderr[-3000:]

        doc = load_json(out / "report.json")
        results = doc["results"]
        assert results["ranks"] and all(r["ended_by"] == "exit 0" for r in results["ranks"]), results["ranks"]
        assert not results.get("left_running"), results.get("left_running")
        assert [p["pid"] for p in results["ended_after"]] == [helper], "ddplab should have ended the helper"
        assert not psutil.pid_exists(helper) or psutil.Process(helper).status() == psutil.STATUS_ZOMBIE
        shown = {"report.json": (out / "report.json").read_text(), "report.html": (out / "report.html").read_text(),
                 "terminal": done.stdout + done.stderr}
        for where, text in shown.items():
            leaked = [name for name, value in SECRETS.items() if value in text]
            assert not leaked, f"{where} shows the secret(s) {leaked}"

        args = doc["config"]["target"]["args"]
        assert args == ["--api-key", "[redacted]", "--token=[redacted]", "--model", "[redacted]", "[redacted]",
                        "--github=[redacted]", "--db=postgres://alice:[redacted]@db.example:5432/runs", "--header",
                        "Authorization: Bearer [redacted]", "--tokenizer", "gpt2", "--epochs", "3"]
        assert doc["argv"][-len(args):] == args  # the envelope's command line, the same way
        assert results["ended_after"][0]["cmdline"].startswith("python"), results["ended_after"]  # the program only
        assert "--tokenizer gpt2" in " ".join(doc["argv"])  # ordinary arguments are shown as typed
    finally:
        if helper is not None:
            try:
                proc = psutil.Process(helper)
                proc.kill()
                proc.wait(5)
            except psutil.NoSuchProcess:
                pass
