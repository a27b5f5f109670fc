"""The session's sharing daemon: when it cannot be used the run is re-planned without it, and no
daemon is ever left running. On CPU, with a stand-in control binary that starts a real process."""

import os
import shutil
import stat
import sys
import textwrap

import psutil
import pytest

from ddplab.job import session
from ddplab.records.config import LaunchOptions
from ddplab.errors import EnvironmentUnsupported
from ddplab.platform import describe, sharing_daemon
from ddplab.job.policy import PRIVATE_DAEMON, plan
from tests.conftest import processes_with_env
from tests.unit import fakes
from ddplab.records.storm import StormSettings
from ddplab.basics.rundir import RunDir

# Stand-in for nvidia-cuda-mps-control: `-d` starts a detached "daemon" (a copy of sleep that carries
# the daemon's process name, as the real one does) listening on $CUDA_MPS_PIPE_DIRECTORY; "quit" on
# stdin ends it. Clients cannot reach it: on this CPU machine the test client fails, as a client of a
# poisoned daemon does.
_CONTROL = textwrap.dedent("""\
    #!{python}
    import os, signal, subprocess, sys
    pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")
    if sys.argv[1:] == ["-d"]:
        os.makedirs(pipe, exist_ok=True)
        daemon = subprocess.Popen([{daemon!r}, "600"], start_new_session=True, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        open(os.path.join(pipe, "daemon.pid"), "w").write(str(daemon.pid))
        open(os.path.join(pipe, "control"), "w").close()
    elif sys.stdin.read().strip() == "quit":
        os.kill(int(open(os.path.join(pipe, "daemon.pid")).read()), signal.SIGTERM)
""")


@pytest.fixture
def fake_control(tmp_path, monkeypatch):
    """A control binary on PATH; yields the path of the daemon executable it starts."""
    name = "nvidia-cuda-mps-control"
    (tmp_path / "bin").mkdir()
    (tmp_path / "daemon").mkdir()
    daemon = tmp_path / "daemon" / name
    shutil.copy(shutil.which("sleep"), daemon)
    control = tmp_path / "bin" / name
    control.write_text(_CONTROL.format(python=sys.executable, daemon=str(daemon)))
    control.chmod(control.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{control.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv(sharing_daemon.PIPE_ENV, raising=False)
    yield daemon
    for proc in _running(daemon):  # a failing test must not leave its daemon behind either
        proc.kill()


def _running(executable) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["exe", "status"]):
        if proc.info["exe"] == str(executable) and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def _platform():
    return describe(fakes.nvidia(loaded="2.30.7", mps_control=True))


class _Recorder(sharing_daemon.PrivateDaemon):
    """The real daemon handling; remembers the daemon process it started, to check it is gone."""

    started_pids: list[int] = []

    def _start_private(self):
        pipe = super()._start_private()
        _Recorder.started_pids.append(int((pipe / "daemon.pid").read_text()))
        return pipe


def _run(tmp_path) -> RunDir:
    return RunDir.create(tmp_path / "run", "test")


def test_daemon_that_refuses_a_client_is_stopped_and_the_run_replanned_to_gloo(tmp_path, fake_control):
    opts, platform = LaunchOptions(nproc=2), _platform()
    first = plan(opts, platform)
    assert first.backend == "nccl" and first.sharing_daemon == PRIVATE_DAEMON

    _Recorder.started_pids = []
    placement, daemon = session.start_sharing_daemon(opts, platform, first, _run(tmp_path), _Recorder)

    assert len(_Recorder.started_pids) == 1, "the stand-in daemon was really started"
    assert not psutil.pid_exists(_Recorder.started_pids[0]) or \
        psutil.Process(_Recorder.started_pids[0]).status() == psutil.STATUS_ZOMBIE
    assert _running(fake_control) == []
    assert placement.backend == "gloo" and placement.sharing_daemon is None
    assert "MPS daemon could not be used: a test client was refused" in placement.backend_reason
    assert any("could not be used" in w for w in placement.warnings)
    record = daemon.record()
    assert record["used"] is False and record["failure"].startswith("a test client was refused")
    assert record["events"][-1] == "stopped"


def test_with_mps_insisted_a_refusing_daemon_is_an_error_and_is_stopped(tmp_path, fake_control):
    opts, platform = LaunchOptions(nproc=2, sharing_daemon="on"), _platform()
    with pytest.raises(EnvironmentUnsupported) as err:
        session.start_sharing_daemon(opts, platform, plan(opts, platform), _run(tmp_path))
    assert err.value.reference == "sharing-daemon-unavailable"
    assert err.value.exit_code == 3
    assert _running(fake_control) == []


@pytest.mark.slow
def test_a_run_started_without_a_working_daemon_is_replanned_and_leaves_nothing(tmp_path, fake_control):
    opts = LaunchOptions(nproc=2, run_dir=str(tmp_path / "run"), timeout_s=30)
    platform = _platform()
    workload = session.Workload("storm", StormSettings(iters=10, bytes=4, warmup=1, per_op_iters=10))
    s = session.run_workload(workload, opts, "storm", sample=False, prepared=(platform, plan(opts, platform)))
    # The re-planned run is recorded as what ran, with why; its ranks then fail here (no such device on
    # this CPU machine), which is not what this test is about.
    assert s.placement.backend == "gloo" and s.placement.sharing_daemon is None
    daemon = s.record.sharing_daemon
    assert daemon["used"] is False and "refused" in daemon["failure"]
    assert any("could not be used" in w for w in s.record.warnings)
    assert _running(fake_control) == []
    # multiprocessing's resource tracker, a helper of this (launcher) process, lives as long as it does.
    left = [p for p in processes_with_env("DDPLAB_RUN_ID", s.outcome.run_id)
            if "resource_tracker" not in " ".join(p.cmdline())]
    assert left == []

