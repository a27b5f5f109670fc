"""`ddplab launch -- train.py --api-key X ...`: the job runs with its arguments as typed, and no secret among them
(nor one of its environment) reaches any file of the job directory (job.json, the ranks' status, error and stacks,
the report, its page and trace, the ranks' logs) or ddplab's own lines on the terminal: not even where a rank's
error message quotes it, nor through a process the job left running, which ddplab ends and names by its program
only (basics/redaction.py, files.write_text_atomic, supervision/job.py). One real launch for all of it."""

import json

import psutil
import pytest

from tests.conftest import load_json, run_cli

pytestmark = pytest.mark.slow

# Fake values with real credentials' shapes, and plain secrets behind secret-named flags and variables.
SECRETS = {
    "api_key": "plain-api-key-0001",
    "token": "plain-token-0002",
    "hf": "hf_FakeHuggingFaceToken0003xyz",
    "openai": "sk-proj-FakeOpenAiKey0004abcdefgh",
    "github": "ghp_FakeGitHubToken0005abcdefghijklmnop",
    "db_password": "pl4in-db-pw-0006",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJmYWtlLTAwMDcifQ.ZmFrZS1zaWduYXR1cmUtMDAwNw",
    "short_p": "pl4in-p-0008",
    "pass": "plain-pass-0009",
    "environment": "plain-env-token-0010",
}
ENV = {"DDPLAB_TEST_SERVICE_TOKEN": SECRETS["environment"]}
SCRIPT_ARGS = ["--api-key", SECRETS["api_key"], f"--token={SECRETS['token']}", "--model", SECRETS["hf"],
               SECRETS["openai"], f"--github={SECRETS['github']}",
               f"--db=postgres://alice:{SECRETS['db_password']}@db.example:5432/runs", "--header",
               f"Authorization: Bearer {SECRETS['jwt']}", "-p", SECRETS["short_p"], "--pass", SECRETS["pass"],
               "--tokenizer", "gpt2", "--epochs", "3"]
# Each rank records the arguments it was given and prints them (its log); rank 0 leaves a process carrying some of
# them running (in a session of its own), so that the report's ended_after[] names a process whose command line
# holds them; then rank 1 fails with an error that quotes every secret it was given.
SCRIPT = """import json, os, subprocess, sys
import torch.distributed as dist
dist.init_process_group("gloo")
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "argv-" + os.environ["RANK"] + ".json")
with open(out, "w") as f:
    json.dump(sys.argv[1:], f)
print("arguments:", sys.argv[1:], os.environ["DDPLAB_TEST_SERVICE_TOKEN"], flush=True)
if dist.get_rank() == 0:
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *sys.argv[1:6]],
                              start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out + ".helper", "w") as f:
        f.write(str(helper.pid))
dist.barrier()
if dist.get_rank() == 1:
    raise RuntimeError("cannot log in with " + " ".join(sys.argv[1:]) + " " + os.environ["DDPLAB_TEST_SERVICE_TOKEN"])
dist.destroy_process_group()
"""


def test_secrets_reach_the_job_but_no_file_of_its_directory(tmp_path):
    script, out = tmp_path / "show_argv.py", tmp_path / "job"
    script.write_text(SCRIPT)
    helper = None
    try:
        done = run_cli("launch", "--nproc-per-node", "2", "--hang-timeout", "30", "--redirects", "3", "--log-dir",
                       str(out / "logs"), "--out", str(out), "--", str(script), *SCRIPT_ARGS, timeout=180,
                       cwd=tmp_path, env=ENV)
        helper_file = tmp_path / "argv-0.json.helper"
        helper = int(helper_file.read_text()) if helper_file.exists() else None

        for rank in (0, 1):  # the job ran with its arguments as typed
            assert json.loads((tmp_path / f"argv-{rank}.json").read_text()) == SCRIPT_ARGS, done.stderr[-3000:]

        doc = load_json(out / "report.json")
        results = doc["results"]
        assert done.returncode == 1 and results["outcome"] == "failed", done.stdout[-3000:]
        failed = next(r for r in results["ranks"] if r["rank"] == 1)
        assert failed["error"]["type"] == "RuntimeError" and "cannot log in with --api-key [redacted]" in \
            failed["error"]["message"], failed["error"]
        assert not results.get("left_running"), results.get("left_running")
        assert [p["pid"] for p in results["ended_after"]] == [helper], "ddplab should have ended the helper"
        assert not psutil.pid_exists(helper) or psutil.Process(helper).status() == psutil.STATUS_ZOMBIE
        assert results["ended_after"][0]["cmdline"].startswith("python"), results["ended_after"]  # the program only

        files = [path for path in out.rglob("*") if path.is_file()]
        assert {"job.json", "status.json", "error.json", "stacks.txt", "report.trace.json", "stdout.log"} <= \
            {path.name for path in files}, sorted(path.name for path in files)
        logs = "".join(path.read_text() for path in out.rglob("stdout.log"))
        assert "arguments:" in logs and "[redacted]" in logs, logs  # what the ranks printed, withheld
        ours = done.stdout[done.stdout.index("ddplab launch: FAILED"):]  # after the job: ddplab's lines alone
        assert "cannot log in with --api-key [redacted]" in ours, ours
        for where, text in {**{str(path.relative_to(out)): path.read_bytes().decode(errors="replace")
                               for path in files}, "ddplab's summary": ours}.items():
            leaked = [name for name, value in SECRETS.items() if value in text]
            assert not leaked, f"{where} shows the secret(s) {leaked}"

        args = doc["config"]["target"]["args"]
        assert args == ["--api-key", "[redacted]", "--token=[redacted]", "--model", "[redacted]", "[redacted]",
                        "--github=[redacted]", "--db=postgres://alice:[redacted]@db.example:5432/runs", "--header",
                        "Authorization: Bearer [redacted]", "-p", "[redacted]", "--pass", "[redacted]",
                        "--tokenizer", "gpt2", "--epochs", "3"]
        assert doc["argv"][-len(args):] == args  # the envelope's command line, the same way
        assert "--tokenizer gpt2" in " ".join(doc["argv"])  # ordinary arguments are shown as typed
    finally:
        if helper is not None:
            try:
                proc = psutil.Process(helper)
                proc.kill()
                proc.wait(5)
            except psutil.NoSuchProcess:
                pass
