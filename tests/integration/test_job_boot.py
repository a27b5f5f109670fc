"""The boot module each rank of `ddplab launch` runs before the user's code, one process at a
time (no torch, no process group): python's own semantics, the error record, dumps on request,
faulthandler's signal, the guard, --no-python.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ddplab.supervision.rank import STACK_SIGNAL
from ddplab.basics.rundir import RunDir
from ddplab.supervision.evidence import answered
from ddplab.supervision.watcher import request_dumps
from ddplab.platform.flight_recorder import recorder_environment

PROBE = textwrap.dedent("""
    import json, os, pickle, sys
    import helper  # a sibling module: needs sys.path[0] to be this script's directory

    class Point:
        def __init__(self, x):
            self.x = x

    print(json.dumps({
        "argv": sys.argv, "path0": sys.path[0], "name": __name__, "file": __file__,
        "main_is_this_module": sys.modules["__main__"].__dict__ is globals(),
        "spec": None if __spec__ is None else __spec__.name,
        "pickled": pickle.loads(pickle.dumps(Point(3))).x, "helper": helper.VALUE,
    }))
""")


class JobDir:
    """The job directory's files, as these tests read them (rundir.RunDir owns the layout)."""

    def __init__(self, path: Path, run_id: str):
        self.run = RunDir(Path(path), run_id)

    @classmethod
    def create(cls, out: str) -> "RunDir":
        return RunDir.create(out, "launch", option="--out")

    def rank_environment(self, launcher_pid: int, ticks) -> dict:
        return self.run.marker_env(launcher_pid, ticks)

    def read_status(self, rank: int) -> dict | None:
        return _read(self.run.status_file(rank))

    def read_error(self, rank: int) -> dict | None:
        return _read(self.run.error_file(rank))

    def stacks_file(self, rank: int) -> Path:
        return self.run.stack_file(rank)

    def fatal_file(self, rank: int) -> Path:
        return self.run.fatal_file(rank)

    def request_dumps(self, reason: str, by: str) -> str:
        return request_dumps(self.run, reason, by)

    def answered(self, rank: int) -> str | None:
        return answered(self.run, rank)


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def job_env(job: Path, launcher_pid: int | None = None, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_FR_", "TORCH_NCCL_"))}
    env.update(JobDir(job, "test-boot").rank_environment(launcher_pid or os.getpid(), None))
    env.update({"RANK": "0", "LOCAL_RANK": "0", "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


def boot(args: list[str], job: Path, cwd: Path, timeout: float = 60, **extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-u", "-m", "ddplab.job.boot", *args], cwd=cwd, env=job_env(job, **extra),
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def job(tmp_path) -> Path:
    return JobDir.create(str(tmp_path / "job")).path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_a_script_sees_what_python_script_py_gives_it(tmp_path, job):
    write(tmp_path / "scripts" / "probe.py", PROBE)
    write(tmp_path / "scripts" / "helper.py", "VALUE = 42\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    args = ["../scripts/probe.py", "a", "--out", "b"]
    plain = subprocess.run([sys.executable, "-u", *args], cwd=elsewhere, capture_output=True, text=True, timeout=60)
    booted = boot(args, job, elsewhere)
    assert plain.returncode == booted.returncode == 0, booted.stderr
    assert json.loads(booted.stdout) == json.loads(plain.stdout)
    assert json.loads(booted.stdout)["path0"] == str(tmp_path / "scripts")


def test_a_module_sees_what_python_m_gives_it(tmp_path, job):
    write(tmp_path / "pkg" / "__init__.py", "")
    write(tmp_path / "pkg" / "probe.py", PROBE.replace("import helper", "from pkg import helper"))
    write(tmp_path / "pkg" / "helper.py", "VALUE = 7\n")
    plain = subprocess.run([sys.executable, "-u", "-m", "pkg.probe", "x"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=60)
    booted = boot(["-m", "pkg.probe", "x"], job, tmp_path)
    assert plain.returncode == booted.returncode == 0, booted.stderr
    assert json.loads(booted.stdout) == json.loads(plain.stdout)


def test_an_uncaught_exception_is_printed_recorded_and_ends_the_rank(tmp_path, job):
    write(tmp_path / "bad.py", """
        def explode():
            raise ValueError("boom in shard 3")

        explode()
    """)
    done = boot(["bad.py"], job, tmp_path)
    assert done.returncode == 1
    assert "Traceback (most recent call last)" in done.stderr and "ValueError: boom in shard 3" in done.stderr
    assert "ddplab/job" not in done.stderr  # python's traceback: the user's frames only
    jd = JobDir(job, "test-boot")
    error = jd.read_error(0)
    assert (error["type"], error["message"]) == ("ValueError", "boom in shard 3")
    assert "in explode" in error["traceback"]
    assert jd.read_status(0)["phase"] == "failed" and jd.read_status(0)["exit_code"] == 1
    assert "bad.py" in jd.stacks_file(0).read_text()


@pytest.mark.parametrize("code, phase", [(0, "finished"), (3, "failed")])
def test_sys_exit_keeps_its_status(tmp_path, job, code, phase):
    write(tmp_path / "leave.py", f"import sys\nsys.exit({code})\n")
    done = boot(["leave.py"], job, tmp_path)
    assert done.returncode == code
    jd = JobDir(job, "test-boot")
    assert jd.read_status(0)["phase"] == phase
    assert (jd.read_error(0) or {}).get("type") == (None if code == 0 else "SystemExit")


def test_the_flight_recorder_is_switched_on_unless_the_user_chose(tmp_path, job):
    write(tmp_path / "env.py", """
        import json, os
        print(json.dumps({k: v for k, v in os.environ.items() if k.startswith(("TORCH_FR_", "TORCH_NCCL_"))}))
    """)
    chosen_by_ddplab = json.loads(boot(["env.py"], job, tmp_path).stdout)
    assert chosen_by_ddplab == {"TORCH_FR_BUFFER_SIZE": "2000",
                                "TORCH_FR_DUMP_TEMP_FILE": str(job / "fr" / "torch_rank_")}
    chosen_by_user = json.loads(boot(["env.py"], job, tmp_path, TORCH_NCCL_TRACE_BUFFER_SIZE="0").stdout)
    assert chosen_by_user == {"TORCH_NCCL_TRACE_BUFFER_SIZE": "0",
                              "TORCH_FR_DUMP_TEMP_FILE": str(job / "fr" / "torch_rank_")}
    assert "set by the user (TORCH_NCCL_TRACE_BUFFER_SIZE=0)" in JobDir(job, "x").read_status(0)["flight_recorder"]


def test_torch_before_2_9_gets_the_older_names():
    assert recorder_environment({}, "/j/fr/torch_rank_", (2, 8)) == {
        "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/j/fr/torch_rank_"}
    assert recorder_environment({"TORCH_FR_DUMP_TEMP_FILE": "/mine"}, "/j/", (2, 13)) == {
        "TORCH_FR_BUFFER_SIZE": "2000"}


def test_a_rank_blocked_in_user_code_answers_dump_requests_and_the_stack_signal(tmp_path, job):
    write(tmp_path / "stuck.py", """
        import threading

        def wait_for_a_batch_that_never_comes():
            threading.Event().wait()

        wait_for_a_batch_that_never_comes()
    """)
    proc = subprocess.Popen([sys.executable, "-u", "-m", "ddplab.job.boot", "stuck.py"], cwd=tmp_path,
                            env=job_env(job), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    jd = JobDir(job, "test-boot")
    try:
        assert _wait_for(lambda: "stuck.py" in str((jd.read_status(0) or {}).get("where")), 30), proc.stderr
        where = jd.read_status(0)["where"]
        assert where["torch_call"] is None
        assert "wait_for_a_batch_that_never_comes" in where["frames"][2]
        request = jd.request_dumps("test", by="test")
        assert _wait_for(lambda: jd.answered(0) == request, 5)
        assert "in wait_for_a_batch_that_never_comes" in jd.stacks_file(0).read_text()

        os.kill(proc.pid, STACK_SIGNAL)
        assert _wait_for(lambda: "wait_for_a_batch_that_never_comes" in jd.fatal_file(0).read_text(), 5)
        assert proc.poll() is None  # faulthandler's signal dumps and the rank goes on
    finally:
        proc.kill()
        proc.wait(10)


def test_the_guard_ends_a_rank_whose_launcher_is_already_gone(tmp_path, job):
    write(tmp_path / "long.py", "import time\ntime.sleep(60)\n")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    done = boot(["long.py"], job, tmp_path, timeout=30, launcher_pid=gone.pid)
    assert done.returncode == -signal.SIGKILL


def test_no_python_execs_the_command_in_the_rank_process(tmp_path, job):
    proc = subprocess.Popen([sys.executable, "-u", "-m", "ddplab.job.boot", "--no-python", "sh", "-c", "echo $$"],
                            cwd=tmp_path, env=job_env(job), stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert int(out.strip()) == proc.pid  # exec, not a child: the guard's PR_SET_PDEATHSIG still applies
    assert JobDir(job, "x").read_status(0)["phase"] == "exec"


def _wait_for(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except OSError:
            pass
        time.sleep(0.05)
    return False
