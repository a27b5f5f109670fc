"""`ddplab clean` ends only what a launcher marked and whose launcher is provably gone
(docs/processes.md): real torchrun orphans are ended; a nohup'd user job, live runs in other
PID namespaces and torchrun workers under a pid-1 torchrun are left alone; `--pid` ends only
the process named, and only if it is still the same process."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from types import SimpleNamespace
from pathlib import Path

import psutil
import pytest

from ddplab.supervision import procs
from ddplab.lab import run as lab
from ddplab.records import Report, Verdict
from ddplab.records.run import StageRecord
from ddplab.platform import DeviceMonitor, DeviceSample
from ddplab.records.codec import to_json
from tests.conftest import load_json, run_cli

pytestmark = pytest.mark.slow

SECRET = "hf_DoNotLeakThisToken"
SLEEPER = "import time\nwhile True: time.sleep(1)\n"
# A user's own job on the device: holds a "device node" (a file the test names as one), has
# secrets in its arguments, no launcher variables; started with nohup from a shell that exits.
GPU_JOB = """import sys, time
node = open(sys.argv[1], "rb")
open(sys.argv[2], "w").close()
while True: time.sleep(1)
"""
# torchrun's worker: says it is ready only after init_process_group, so the agent is never
# killed while a worker could still end on its own.
TORCHRUN_WORKER = """import os, sys, time
import torch.distributed as dist
dist.init_process_group("gloo")
ready = sys.argv[sys.argv.index("--ready-dir") + 1]
with open(os.path.join(ready, os.environ["LOCAL_RANK"]), "w") as f:
    f.write(str(os.getpid()))
while True: time.sleep(1)
"""
# A ddplab launcher as launch.py marks its ranks (run id and directory, pid, start ticks), without torch: its run
# directory holds its run id, as RunDir.create leaves it.
FAKE_LAUNCHER = """import os, subprocess, sys, time
stat = open("/proc/self/stat").read()
ticks = stat[stat.rindex(")") + 2:].split()[19]
run_dir = sys.argv[2]
os.makedirs(run_dir)
with open(os.path.join(run_dir, "run-id"), "w") as f:
    f.write(sys.argv[1] + "\\n")
env = {k: v for k, v in os.environ.items() if not k.startswith(("DDPLAB_", "TORCHELASTIC_"))}
env.update(DDPLAB_RUN_ID=sys.argv[1], DDPLAB_RUN_DIR=run_dir, DDPLAB_LAUNCHER_PID=str(os.getpid()),
           DDPLAB_LAUNCHER_START=ticks)
rank = subprocess.Popen([sys.executable, "-c", "import time\\nwhile True: time.sleep(1)\\n"], env=env)
print(rank.pid, flush=True)
while True: time.sleep(1)
"""


class FakeDeviceMonitor(DeviceMonitor):
    """Device memory per pid, as the platform's monitor reports it on an accelerator."""

    api = "test"

    def __init__(self, process_mem_bytes: dict[int, int]):
        self.process_mem_bytes = process_mem_bytes

    def sample(self) -> DeviceSample:
        return DeviceSample(process_mem_bytes=dict(self.process_mem_bytes))


def _clean_env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith(("DDPLAB_", "TORCHELASTIC_"))}


def _nohup(*argv: str, env: dict | None = None) -> int:
    """`nohup ARGV &` from a shell that exits at once: the job's parent becomes init. ``env``: variables besides."""
    line = " ".join(f"'{a}'" for a in argv)
    out = subprocess.run(["sh", "-c", f"nohup {line} >/dev/null 2>&1 & echo $!"], capture_output=True, text=True,
                         env={**_clean_env(), **(env or {})}, check=True).stdout
    return int(out.strip())  # the shell has exited: the job's parent is init now


def _wait_for(predicate, timeout_s: float, step_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except psutil.Error:
            value = None
        if value:
            return value
        time.sleep(step_s)
    return None


def _kill(*pids: int) -> None:
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, TypeError):
            pass


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _gpu_job(tmp_path: Path) -> int:
    node, started = tmp_path / "accel0", tmp_path / "job-started"
    node.write_bytes(b"")
    script = tmp_path / "gpu_job.py"
    script.write_text(GPU_JOB)
    pid = _nohup(sys.executable, str(script), str(node), str(started), "--hf-token", SECRET)
    assert _wait_for(started.exists, 30), "the stand-in GPU job never started"
    return pid


def _torchrun_argv(tmp_path: Path, n: int) -> tuple[list[str], Path]:
    script, ready = tmp_path / "worker.py", tmp_path / "ready"
    script.write_text(TORCHRUN_WORKER)
    ready.mkdir(exist_ok=True)
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(n), str(script),
            "--ready-dir", str(ready), "--hf-token", SECRET], ready


def _torchrun_orphans(tmp_path, n=2) -> list[int]:
    argv, ready = _torchrun_argv(tmp_path, n)
    agent = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                             env=_clean_env())
    if not _wait_for(lambda: len(list(ready.glob("*"))) == n, 120):
        _kill(*[c.pid for c in psutil.Process(agent.pid).children(recursive=True)], agent.pid)
        agent.wait()
        pytest.fail("torchrun workers never finished init")
    workers = sorted(int(f.read_text()) for f in ready.glob("*"))
    os.kill(agent.pid, signal.SIGKILL)
    agent.wait()
    assert _wait_for(lambda: all(psutil.Process(p).ppid() == 1 for p in workers), 10), "workers should be orphans"
    return workers


# A torchrun worker that detaches a helper as users do (`setsid nohup ... &` from a shell that exits): the helper
# carries the run's marker and is re-parented to init while the worker and its agent live.
DETACHING_WORKER = """import os, subprocess, sys, time
out = subprocess.run(["sh", "-c", "setsid nohup sleep 300 >/dev/null 2>&1 & echo $!"], capture_output=True,
                     text=True, check=True).stdout
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(out.strip() + " " + str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True: time.sleep(1)
"""


def test_a_helper_a_worker_detached_is_no_orphan_while_its_agent_lives(tmp_path):
    script, ready = tmp_path / "detaching_worker.py", tmp_path / "ready"
    script.write_text(DETACHING_WORKER)
    agent = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1",
                              str(script), str(ready)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True, env=_clean_env())
    helper = worker = None
    try:
        assert _wait_for(ready.exists, 120), "the torchrun worker never started its helper"
        helper, worker = (int(pid) for pid in ready.read_text().split())
        assert _wait_for(lambda: psutil.Process(helper).ppid() == 1, 10), "the helper should be re-parented to init"
        assert psutil.Process(worker).ppid() == agent.pid

        proc = run_cli("clean", "--yes", "--json", str(tmp_path / "clean.json"))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert helper not in {o["pid"] for o in load_json(tmp_path / "clean.json")["results"]["orphans"]}
        assert _alive(helper) and _alive(worker), "`ddplab clean --yes` ended a live job's helper"
        proc = run_cli("clean", "--pid", str(helper), "--json", str(tmp_path / "named.json"))
        named = load_json(tmp_path / "named.json")["results"]["named"]
        assert proc.returncode == 0 and named["pid"] == helper, proc.stdout + proc.stderr
        assert named["not_orphan_because"].startswith("torchrun process of run ") and \
            f"the launcher of its run (pid {agent.pid}, " in named["not_orphan_because"], named

        os.kill(agent.pid, signal.SIGKILL)  # the agent is gone, and its worker with it
        agent.wait()
        _kill(worker)
        assert _wait_for(lambda: not _alive(worker), 10)
        orphans = {o.pid: o for o in procs.survey().orphans}
        assert helper in orphans, "the helper of a run whose agent and worker are gone should be an orphan"
        assert "no launcher of its run is alive" in orphans[helper].reason
        proc = run_cli("clean", "--pid", str(helper), "--yes", "--json", str(tmp_path / "end.json"))
        ended = load_json(tmp_path / "end.json")["results"]["ended"]
        assert proc.returncode == 0 and ended["terminated"] + ended["killed"] == [helper], proc.stdout + proc.stderr
        assert _wait_for(lambda: not _alive(helper), 5)
    finally:
        _kill(agent.pid, *(p for p in (worker, helper) if p))
        agent.wait()


def test_clean_ends_exactly_the_orphans(tmp_path):
    innocent = _nohup(sys.executable, "-c", SLEEPER)
    workers = []
    try:
        workers = _torchrun_orphans(tmp_path)
        listed = run_cli("clean", "--json", str(tmp_path / "list.json"))
        doc = load_json(tmp_path / "list.json")
        mine = {o["pid"]: o for o in doc["results"]["orphans"] if o["pid"] in workers}
        assert set(mine) == set(workers) and innocent not in {o["pid"] for o in doc["results"]["orphans"]}
        for o in mine.values():
            assert set(o) == {"pid", "ppid", "create_time", "age_s", "cmdline", "device_mem_bytes", "run_id",
                              "reason"}
            assert o["cmdline"] == f"{Path(sys.executable).name} worker.py" and o["ppid"] == 1
        assert SECRET not in (tmp_path / "list.json").read_text(), "an orphan's arguments reached the report"
        assert all(_alive(p) for p in workers), "without --yes nothing is ended"
        assert listed.returncode == 0 and doc["verdict"] == "warn"

        proc = run_cli("clean", "--yes", "--json", str(tmp_path / "clean.json"))
        doc = load_json(tmp_path / "clean.json")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert set(workers) <= set(doc["results"]["ended"]["terminated"]) | set(doc["results"]["ended"]["killed"])
        assert _wait_for(lambda: not any(_alive(p) for p in workers), 5)
        assert _alive(innocent), "an innocent Python process was killed"
    finally:
        _kill(innocent, *workers)


def test_a_nohup_gpu_job_is_another_process_never_an_orphan(tmp_path):
    job = _gpu_job(tmp_path)
    try:
        assert psutil.Process(job).ppid() == 1
        monitor, nodes = FakeDeviceMonitor({job: 1_717_986_918}), (str(tmp_path / "accel*"),)  # 1.6 GiB
        assert job not in {o.pid for o in procs.survey(monitor, nodes).orphans}
        others = {o.pid: o for o in procs.survey(monitor, nodes).other_processes}
        entry = others[job]
        assert (entry.program, entry.user, entry.device_mem_bytes, entry.holds_device_node) == \
            (f"{Path(sys.executable).name} gpu_job.py", psutil.Process(job).username(), 1_717_986_918, True)
        assert entry.not_orphan_because == "no launcher marked it"
        assert SECRET not in json.dumps(to_json(entry)), "the job's arguments reached the report"

        proc = run_cli("clean", "--yes", "--json", str(tmp_path / "clean.json"))
        assert proc.returncode in (0, 1), proc.stderr
        assert job not in {o["pid"] for o in load_json(tmp_path / "clean.json")["results"]["orphans"]}
        assert _alive(job), "`ddplab clean --yes` ended a user's job"
        env = run_cli("env", "--json", str(tmp_path / "env.json"))
        assert env.returncode in (0, 1), env.stderr
        assert job not in {o["pid"] for o in load_json(tmp_path / "env.json")["results"]["orphans"]}
    finally:
        _kill(job)


def test_a_process_no_launcher_started_is_never_listed_whatever_its_markers_say(tmp_path):
    """Started by hand and detached (parent init), with a run marker: torchrun's placeholder run id, a torchrun id
    alone (elastic's agent gives its workers more), a ddplab id whose run directory does not hold it."""
    markers = [{"TORCHELASTIC_RUN_ID": "none"}, {"TORCHELASTIC_RUN_ID": "3f2a9c1e-by-hand"},
               {"DDPLAB_RUN_ID": "train-by-hand", "DDPLAB_RUN_DIR": str(tmp_path), "DDPLAB_LAUNCHER_PID": "99999",
                "DDPLAB_LAUNCHER_START": "1"}]
    pids = [_nohup(sys.executable, "-c", SLEEPER, env=env) for env in markers]
    try:
        assert _wait_for(lambda: all(psutil.Process(p).ppid() != os.getpid() for p in pids), 10)
        proc = run_cli("clean", "--json", str(tmp_path / "clean.json"))
        assert proc.returncode == 0, proc.stderr
        listed = {o["pid"] for o in load_json(tmp_path / "clean.json")["results"]["orphans"]}
        assert not listed & set(pids), (listed, pids, proc.stdout)
    finally:
        _kill(*pids)


def test_clean_pid_ends_only_the_named_process_and_only_with_yes(tmp_path):
    named, bystander = _nohup(sys.executable, "-c", SLEEPER), _nohup(sys.executable, "-c", SLEEPER)
    try:
        proc = run_cli("clean", "--pid", str(named), "--json", str(tmp_path / "list.json"))
        doc = load_json(tmp_path / "list.json")
        assert proc.returncode == 0, proc.stderr
        assert doc["results"]["named"]["pid"] == named and doc["results"]["ended"] is None
        assert _alive(named), "--pid without --yes must only show the process"

        proc = run_cli("clean", "--pid", str(named), "--yes", "--json", str(tmp_path / "end.json"))
        ended = load_json(tmp_path / "end.json")["results"]["ended"]
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert ended["terminated"] + ended["killed"] == [named] and ended["refused"] == []
        assert _wait_for(lambda: not _alive(named), 5) and _alive(bystander)

        for pid in ("1", str(os.getpid()), "0"):  # init, an ancestor of the ddplab process, not a pid
            refused = run_cli("clean", "--pid", pid, "--yes")
            assert refused.returncode == 2 and "refused-pid" in refused.stderr, refused.stderr
    finally:
        _kill(named, bystander)


def test_a_pid_reused_since_it_was_listed_is_refused():
    sleeper = subprocess.Popen([sys.executable, "-c", SLEEPER])
    try:
        real = psutil.Process(sleeper.pid).create_time()
        listed = procs.Orphan(pid=sleeper.pid, ppid=os.getpid(), create_time=real - 3.0, age_s=3.0, cmdline="python",
                              device_mem_bytes=None, run_id="r", reason="listed before the pid was reused")
        result = procs.end([listed], grace_s=1)
        assert result.refused == [sleeper.pid] and result.terminated == [] and result.killed == []
        assert sleeper.poll() is None, "a process that merely reused a listed pid was signalled"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_ddplab_rank_is_an_orphan_once_its_launcher_is_gone(tmp_path):
    launcher, rank = _fake_ddplab_run(tmp_path, "train-launcher-test")
    try:
        assert rank not in {o.pid for o in procs.survey().orphans}, "its launcher is alive"
        os.kill(launcher.pid, signal.SIGKILL)
        launcher.wait()
        assert _wait_for(lambda: psutil.Process(rank).ppid() != launcher.pid, 10)
        orphan = {o.pid: o for o in procs.survey().orphans}[rank]
        assert orphan.run_id == "train-launcher-test" and "gone" in orphan.reason
    finally:
        _kill(launcher.pid, rank)


def test_run_leftover_check_counts_only_this_runs_orphans(tmp_path):
    older, older_rank = _fake_ddplab_run(tmp_path, "train-older-run")
    ours, our_rank = _fake_ddplab_run(tmp_path, "train-this-run")
    try:
        for launcher in (older, ours):
            os.kill(launcher.pid, signal.SIGKILL)
            launcher.wait()
        records = [_stage("train-shared", SimpleNamespace(session=SimpleNamespace(run_id="train-other")))]
        check = lab.leftover_check(records)
        assert check.verdict is Verdict.PASS, check.summary
        assert older_rank in {o.pid for o in check.other_orphans} and check.orphans == []

        records.append(_stage("drills", SimpleNamespace(run_ids=lambda: {"train-this-run"})))
        check = lab.leftover_check(records)
        assert check.verdict is Verdict.FAIL and [o.pid for o in check.orphans] == [our_rank]
    finally:
        _kill(older.pid, older_rank, ours.pid, our_rank)


def _stage(name: str, results) -> StageRecord:
    return StageRecord(name, f"ddplab {name}", Verdict.PASS, "", report=Report(name, None, None, results, Verdict.PASS))


def _fake_ddplab_run(tmp_path: Path, run_id: str) -> tuple[subprocess.Popen, int]:
    script = tmp_path / "fake_launcher.py"
    script.write_text(FAKE_LAUNCHER)
    launcher = subprocess.Popen([sys.executable, str(script), run_id, str(tmp_path / run_id)],
                                stdout=subprocess.PIPE, text=True, env=_clean_env())
    return launcher, int(launcher.stdout.readline())


# -- PID namespaces: a pid in the environment means nothing outside its namespace ------------------

def _unshare_pid(*argv: str) -> subprocess.Popen:
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("nsenter"):
        pytest.skip("needs root, unshare and nsenter for a PID namespace")
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot create a PID namespace here: {probe.stderr.strip()}")
    return subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=_clean_env(), start_new_session=True)


def _end_namespace(unshare: subprocess.Popen) -> None:
    """SIGKILL of a namespace's init ends every process in it."""
    try:
        for child in psutil.Process(unshare.pid).children():
            child.kill()
    except psutil.NoSuchProcess:
        pass
    unshare.kill()
    unshare.wait()


def test_a_live_ddplab_run_in_another_pid_namespace_is_not_listed(tmp_path):
    run_dir = tmp_path / "run"
    # The launcher gets pid 32001 in its namespace: a pid that means nothing (or someone else) here.
    unshare = _unshare_pid("sh", "-c", f"echo 32000 > /proc/sys/kernel/ns_last_pid; {sys.executable} -m ddplab "
                                       f"train --nproc 2 --steps 1000000 --run-dir {run_dir}; exit 0")
    try:
        assert _wait_for(lambda: len(list((run_dir / "pids").glob("*"))) == 2, 120), "ranks never started"
        ranks = [p.pid for p in psutil.process_iter() if _environ(p).get("DDPLAB_RUN_DIR") == str(run_dir)]
        assert len(ranks) >= 2 and all(_alive(p) for p in ranks)
        proc = run_cli("clean", "--json", str(tmp_path / "clean.json"))
        assert proc.returncode == 0, proc.stderr
        listed = {o["pid"] for o in load_json(tmp_path / "clean.json")["results"]["orphans"]}
        assert not listed & set(ranks), "ranks of a live run in another PID namespace were listed as orphans"
    finally:
        _end_namespace(unshare)


def test_workers_of_a_pid_1_torchrun_are_not_listed_inside_its_namespace(tmp_path):
    argv, ready = _torchrun_argv(tmp_path, 2)
    unshare = _unshare_pid(*argv)
    try:
        assert _wait_for(lambda: len(list(ready.glob("*"))) == 2, 120), "torchrun workers never finished init"
        workers = {int(f.read_text()) for f in ready.glob("*")}  # pids inside the namespace
        agent = psutil.Process(unshare.pid).children()[0]  # the namespace's pid 1: torchrun
        out = tmp_path / "clean.json"
        proc = subprocess.run(["nsenter", "--target", str(agent.pid), "--pid", "--mount", sys.executable, "-m",
                               "ddplab", "clean", "--json", str(out)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        listed = {o["pid"] for o in load_json(out)["results"]["orphans"]}
        assert not listed & workers, "workers of a live pid-1 torchrun were listed as orphans"
    finally:
        _end_namespace(unshare)


def _environ(proc: psutil.Process) -> dict:
    try:
        return proc.environ()
    except psutil.Error:
        return {}
