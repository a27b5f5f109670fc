"""The kill_launcher --launcher torchrun drill kills the agent only once every worker has said
it finished init (a ready file), never on a timer: a worker killed mid-init can end on its own,
and the drill would then miss an orphan (issue 9, section 5)."""

import os
import subprocess
import sys
import time

import psutil
import pytest

from ddplab.drills.kill_launcher import wait_for_torchrun_workers

pytestmark = pytest.mark.slow

# Stands in for torchrun: two children that look like torchrun_victim workers (marker variable,
# module name in their command line) and write their ready file only after a slow "init".
AGENT = """import os, subprocess, sys
ready, init_s = sys.argv[1], sys.argv[2]
env = dict(os.environ, TORCHELASTIC_RUN_ID="ready-test")
code = ("import os, sys, time; time.sleep(float(sys.argv[2])); "
        "open(os.path.join(sys.argv[1], sys.argv[3]), 'w').close(); time.sleep(600)")
kids = [subprocess.Popen([sys.executable, "-c", code, ready, init_s, str(r), "ddplab.drills.torchrun_victim"],
                         env=env) for r in range(2)]
for k in kids:
    k.wait()
"""


def test_workers_are_ready_only_after_they_say_so(tmp_path):
    ready = tmp_path / "ready"
    ready.mkdir()
    agent = subprocess.Popen([sys.executable, "-c", AGENT, str(ready), "5"])
    try:
        started = time.monotonic()
        workers = wait_for_torchrun_workers(agent.pid, 2, ready, timeout_s=60)
        assert len(workers) == 2
        assert sorted(os.listdir(ready)) == ["0", "1"], "declared ready before every worker finished init"
        assert time.monotonic() - started >= 4.5
    finally:
        for proc in [*psutil.Process(agent.pid).children(), psutil.Process(agent.pid)]:
            proc.kill()
        agent.wait()
