"""`ddplab clean` on real orphans (a torchrun whose agent was SIGKILLed), beside an innocent
Python process that must survive."""

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tests.conftest import load_json, run_cli

pytestmark = pytest.mark.slow

SLEEPER = "import time\nwhile True: time.sleep(1)\n"


def _detached_python(code: str) -> int:
    """A Python process whose parent is init, with no ddplab or torchrun markers (an innocent job)."""
    r, w = os.pipe()
    if os.fork() == 0:  # double fork: the grandchild is re-parented to init
        os.setsid()
        pid = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env={k: v for k, v in os.environ.items()
                                                                if not k.startswith(("DDPLAB_", "TORCHELASTIC_"))}).pid
        os.write(w, str(pid).encode())
        os._exit(0)
    os.close(w)
    pid = int(os.read(r, 32))
    os.close(r)
    return pid


def _torchrun_orphans(tmp_path, n=2) -> list[int]:
    script = tmp_path / "worker.py"
    script.write_text("import torch.distributed as dist, time\ndist.init_process_group('gloo')\n" + SLEEPER)
    agent = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                              str(n), str(script)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    deadline = time.monotonic() + 60
    workers = []
    while time.monotonic() < deadline and len(workers) < n:
        time.sleep(0.5)
        workers = [c.pid for c in psutil.Process(agent.pid).children() if "worker.py" in " ".join(c.cmdline())]
    time.sleep(2)
    os.kill(agent.pid, signal.SIGKILL)
    agent.wait()
    time.sleep(1)
    assert all(psutil.Process(p).ppid() == 1 for p in workers), "workers should be orphans now"
    return workers


def test_clean_ends_exactly_the_orphans(tmp_path):
    innocent = _detached_python(SLEEPER)
    workers = _torchrun_orphans(tmp_path)
    try:
        assert psutil.Process(innocent).ppid() == 1
        listed = run_cli("clean", "--json", str(tmp_path / "list.json"))
        doc = load_json(tmp_path / "list.json")
        listed_pids = {o["pid"] for o in doc["results"]["orphans"]}
        assert set(workers) <= listed_pids and innocent not in listed_pids
        assert all(psutil.pid_exists(p) for p in workers), "without --yes nothing is ended"
        assert listed.returncode == 0 and doc["verdict"] == "warn"

        proc = run_cli("clean", "--yes", "--json", str(tmp_path / "clean.json"))
        doc = load_json(tmp_path / "clean.json")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert set(workers) <= set(doc["results"]["ended"]["terminated"]) | set(doc["results"]["ended"]["killed"])
        time.sleep(0.5)
        assert not any(_alive(p) for p in workers)
        assert _alive(innocent), "an innocent Python process was killed"
    finally:
        for p in [innocent, *workers]:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
