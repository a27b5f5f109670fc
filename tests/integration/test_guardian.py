"""The guardian (supervision/guardian.py): when a launcher dies by SIGKILL, what its job started is ended anyway,
its private sharing daemon stopped through its own stop command first; when the launcher ends well, the guardian
leaves at once and touches nothing (issues 17 and 18)."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from tests.conftest import survivors

pytestmark = pytest.mark.slow

# A launcher stand-in: a run directory, its guardian, a helper that carries the run id and ignores SIGTERM in a
# session of its own (what a rank's data-loader or a setsid'ed helper is), a "daemon" listed in daemons.json with a
# stop command; then it waits to be killed, or says done.
LAUNCHER = textwrap.dedent("""
    import json, os, subprocess, sys, time
    from ddplab.basics.rundir import RunDir
    from ddplab.supervision.job import Guardian
    from ddplab.basics.proc_stat import start_ticks
    run = RunDir.create(sys.argv[1], "guardian-test")
    guardian = Guardian(run).__enter__()
    helper = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                               "signal.SIG_IGN); time.sleep(300)"], start_new_session=True,
                              env={**os.environ, **run.marker_env(os.getpid(), start_ticks(os.getpid()))})
    daemon = subprocess.Popen(["sleep", "300"], start_new_session=True)
    stop = [sys.executable, "-c", f"open({sys.argv[2]!r}, 'w').write(input())"]
    (run.path / "daemons.json").write_text(json.dumps([{"name": "fake", "stop": stop, "stdin": "quit\\n",
                                                       "pids": [[daemon.pid, start_ticks(daemon.pid)]]}]))
    print(json.dumps({"helper": helper.pid, "daemon": daemon.pid, "guardian": guardian.proc.pid}), flush=True)
    if sys.argv[3] == "done":
        guardian.__exit__(None, None, None)
        print("done", flush=True)
    time.sleep(300)
""")


def _start(tmp_path, how: str):
    proc = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(tmp_path / "run"), str(tmp_path / "stopped"), how],
                            stdout=subprocess.PIPE, text=True)
    pids = json.loads(proc.stdout.readline())
    return proc, pids


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_killed_launchers_guardian_ends_its_helpers_and_stops_its_daemon(tmp_path):
    proc, pids = _start(tmp_path, "kill")
    try:
        time.sleep(0.5)  # the guardian is reading its pipe
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert survivors([pids["helper"], pids["daemon"], pids["guardian"]], _alive, within_s=8) == []
        assert (tmp_path / "stopped").read_text() == "quit"  # its own stop command, with its own input
        done = json.loads((tmp_path / "run" / "guardian.json").read_text())
        assert pids["helper"] in done["terminated"] + done["killed"]
    finally:
        for pid in pids.values():
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_launcher_that_ended_well_leaves_its_guardian_nothing_to_do(tmp_path):
    proc, pids = _start(tmp_path, "done")
    try:
        assert proc.stdout.readline().strip() == "done"
        assert not _alive(pids["guardian"])
        assert _alive(pids["helper"]) and _alive(pids["daemon"])  # the launcher's own cleanup is not the guardian's
        assert not (tmp_path / "stopped").exists() and not (tmp_path / "run" / "guardian.json").exists()
    finally:
        proc.kill()
        proc.wait()
        for pid in (pids["helper"], pids["daemon"]):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
