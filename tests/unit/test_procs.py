"""Orphan evidence as a pure decision over process tables (no processes started).

Each table is what /proc would show in one situation from docs/processes.md; the
integration tests in tests/integration/test_clean.py run the same situations for real.
"""

import os

from ddplab.basics.rundir import LAUNCHER_PID_ENV, LAUNCHER_START_ENV, RUN_DIR_ENV, RUN_ID_ENV
from ddplab.supervision.proc_facts import ELASTIC_WORKER_ENV, TORCHRUN_MARKER, Facts, program_name
from ddplab.basics.proc_stat import start_ticks
from ddplab.supervision.procs import classify

INIT = Facts(pid=1, ppid=0, start_ticks=5, ns_pid=1, create_time=0.0, argv=("/sbin/init",))
TORCHRUN = ("/venv/bin/python", "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "train.py")


def table(*procs: Facts) -> dict[int, Facts]:
    return {p.pid: p for p in procs}


def rank(pid=300, ppid=200, launcher_ns_pid=200, launcher_ticks=1000, run_id="train-1", **kw) -> Facts:
    """A ddplab rank as its launcher marked it; its run directory holds its run (RunDir.create claims it)."""
    markers = {RUN_ID_ENV: run_id, RUN_DIR_ENV: f"/runs/{run_id}", LAUNCHER_PID_ENV: str(launcher_ns_pid),
               LAUNCHER_START_ENV: str(launcher_ticks)}
    return Facts(pid=pid, ppid=ppid, start_ticks=1100, ns_pid=pid, create_time=1.0,
                 argv=("python", "-c", "spawn"), markers=markers, **{"run_dir_holds": run_id, **kw})


# What elastic's agent writes into every worker's environment besides the run id.
AGENT_ENV = {"TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0", "GROUP_RANK": "0",
             "ROLE_NAME": "default", "LOCAL_WORLD_SIZE": "2"}


def worker(pid=300, ppid=200, run_id="tr-1", ticks=1100, **kw) -> Facts:
    return Facts(pid=pid, ppid=ppid, start_ticks=ticks, ns_pid=pid, create_time=1.0, argv=("python", "-u", "train.py"),
                 markers={**AGENT_ENV, TORCHRUN_MARKER: run_id}, **kw)


# -- processes no launcher marked --------------------------------------------------------------

def test_a_nohup_job_with_parent_init_is_not_an_orphan():
    job = Facts(pid=300, ppid=1, start_ticks=1100, ns_pid=300, create_time=1.0, argv=("python", "train.py"))
    v = classify(300, table(INIT, job))
    assert not v.orphan and v.reason == "no launcher marked it"


# -- a marker must tie the process to a run a launcher started --------------------------------

def test_a_placeholder_run_id_ties_a_process_to_no_run():
    # torchrun's own default --rdzv-id; a process started by hand with it, detached so that its parent is init
    for run_id in ("none", "None", "null"):
        v = classify(300, table(INIT, worker(ppid=1, run_id=run_id)))
        assert not v.orphan and "placeholder" in v.reason, v
        assert not classify(300, table(INIT, rank(ppid=1, run_id=run_id))).orphan


def test_a_torchrun_marker_set_by_hand_is_no_evidence():
    by_hand = Facts(pid=300, ppid=1, start_ticks=1100, ns_pid=300, create_time=1.0, argv=("python", "job.py"),
                    markers={TORCHRUN_MARKER: "3f2a9c1e-job"})
    v = classify(300, table(INIT, by_hand))
    assert not v.orphan and "which elastic's agent gives every worker" in v.reason, v
    assert classify(300, table(INIT, worker(ppid=1, run_id="3f2a9c1e-job"))).orphan  # an agent's worker is


def test_a_ddplab_marker_without_its_run_directory_is_no_evidence():
    v = classify(300, table(INIT, rank(ppid=1, run_dir_holds=None)))  # removed, or never written: set by hand
    assert not v.orphan and "does not hold that run" in v.reason, v
    assert not classify(300, table(INIT, rank(ppid=1, run_dir_holds="train-other"))).orphan
    v = classify(300, table(INIT, rank(ppid=1, launcher_ticks=5000)))  # a "launcher" younger than its rank
    assert not v.orphan and "started after it" in v.reason, v


def test_the_elastic_worker_environment_is_what_the_installed_torch_writes():
    import inspect

    from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent

    source = inspect.getsource(LocalElasticAgent._start_workers)
    assert all(f'"{name}"' in source for name in (*ELASTIC_WORKER_ENV, TORCHRUN_MARKER)), ELASTIC_WORKER_ENV


# -- ddplab ranks: the launcher's identity (pid in its namespace, start ticks) -------------------

def test_ddplab_rank_whose_parent_is_its_launcher_is_alive():
    launcher = Facts(pid=200, ppid=1, start_ticks=1000, ns_pid=200, create_time=0.5, argv=("python", "-m", "ddplab"))
    assert not classify(300, table(INIT, launcher, rank())).orphan


def test_ddplab_rank_of_a_launcher_in_another_pid_namespace_is_alive():
    # Seen from the host: the launcher is pid 303 in its namespace and 45678 here; the rank
    # carries 303, which names an unrelated or no process here.
    launcher = Facts(pid=45678, ppid=45600, start_ticks=1000, ns_pid=303, create_time=0.5, argv=("python", "-m",
                                                                                                   "ddplab"))
    unrelated_303 = Facts(pid=303, ppid=1, start_ticks=50, ns_pid=303, create_time=0.1, argv=("sshd",))
    r = rank(pid=45700, ppid=45678, launcher_ns_pid=303)
    v = classify(45700, table(INIT, launcher, unrelated_303, r))
    assert not v.orphan and "alive" in v.reason


def test_ddplab_rank_reparented_to_init_is_an_orphan():
    v = classify(300, table(INIT, rank(ppid=1)))
    assert v.orphan and v.run_id == "train-1" and "gone" in v.reason


def test_ddplab_rank_reparented_while_its_launcher_lives_elsewhere_is_not_an_orphan():
    launcher = Facts(pid=200, ppid=1, start_ticks=1000, ns_pid=200, create_time=0.5, argv=("pytest",))
    assert not classify(300, table(INIT, launcher, rank(ppid=1))).orphan


def test_a_new_process_reusing_the_launcher_pid_does_not_keep_the_rank_alive():
    impostor = Facts(pid=200, ppid=1, start_ticks=9999, ns_pid=200, create_time=9.0, argv=("python", "-m", "ddplab"))
    assert classify(300, table(INIT, impostor, rank(ppid=1))).orphan


def test_no_evidence_means_not_an_orphan():
    no_start = rank(ppid=1)
    no_start.markers.pop(LAUNCHER_START_ENV)  # a rank of an older ddplab
    assert not classify(300, table(INIT, no_start)).orphan
    assert not classify(300, table(INIT, rank(ppid=0))).orphan  # parent outside our PID namespace
    assert not classify(300, table(rank(ppid=77))).orphan  # parent unreadable / not in the table
    assert not classify(300, table(INIT, rank(ppid=1, same_clock=False))).orphan  # another time namespace


# -- torchrun workers: their real parent -------------------------------------------------------

def test_torchrun_worker_of_a_live_agent_is_alive_even_when_the_agent_is_pid_1():
    agent_pid1 = Facts(pid=1, ppid=0, start_ticks=900, ns_pid=1, create_time=0.4, argv=TORCHRUN)
    assert not classify(300, table(agent_pid1, worker(ppid=1))).orphan
    agent = Facts(pid=200, ppid=100, start_ticks=900, ns_pid=200, create_time=0.4, argv=("/venv/bin/torchrun",))
    assert not classify(300, table(INIT, agent, worker())).orphan


def test_torchrun_worker_reparented_to_init_is_an_orphan():
    v = classify(300, table(INIT, worker(ppid=1)))
    assert v.orphan and v.run_id == "tr-1"


def test_torchrun_worker_reparented_to_a_container_init_seen_from_the_host_is_an_orphan():
    tini = Facts(pid=5000, ppid=4990, start_ticks=10, ns_pid=1, create_time=0.1, argv=("/sbin/docker-init", "--"))
    assert classify(300, table(INIT, tini, worker(ppid=5000))).orphan


def test_torchrun_worker_under_a_process_that_is_neither_agent_nor_init_is_no_evidence():
    # e.g. re-parented to a subreaper (systemd --user), or started by a launcher we do not know
    subreaper = Facts(pid=250, ppid=1, start_ticks=20, ns_pid=250, create_time=0.2, argv=("systemd", "--user"))
    assert not classify(300, table(INIT, subreaper, worker(ppid=250))).orphan


def test_python_pid_1_may_be_a_library_launcher_so_its_workers_are_not_orphans():
    launcher = Facts(pid=1, ppid=0, start_ticks=900, ns_pid=1, create_time=0.4, argv=("python", "launch_job.py"))
    assert not classify(300, table(launcher, worker(ppid=1))).orphan


def test_a_workers_own_child_shares_its_verdict():
    agent = Facts(pid=200, ppid=1, start_ticks=900, ns_pid=200, create_time=0.4, argv=TORCHRUN)
    loader = worker(pid=400, ppid=300, ticks=1200)
    assert not classify(400, table(INIT, agent, worker(), loader)).orphan
    v = classify(400, table(INIT, worker(ppid=1), loader))
    assert v.orphan and "child of pid 300" in v.reason


# -- a helper a worker detached (`setsid nohup helper &`): re-parented to init while its agent lives ----------

AGENT = Facts(pid=200, ppid=100, start_ticks=900, ns_pid=200, create_time=0.4, argv=TORCHRUN)


def helper(pid=500, run_id="tr-1", ticks=1300) -> Facts:
    return Facts(pid=pid, ppid=1, start_ticks=ticks, ns_pid=pid, create_time=1.3, argv=("sleep", "300"),
                 markers={**AGENT_ENV, TORCHRUN_MARKER: run_id})  # inherited from its worker


def test_a_detached_helper_is_not_an_orphan_while_its_agent_lives():
    v = classify(500, table(INIT, AGENT, worker(), helper()))
    assert not v.orphan and v.reason == ("torchrun process of run tr-1, re-parented to init (pid 1); the launcher of "
                                         "its run (pid 200, python -m torch.distributed.run) is alive")


def test_a_detached_helper_is_an_orphan_once_agent_and_workers_are_gone():
    v = classify(500, table(INIT, helper()))
    assert v.orphan and "no launcher of its run is alive" in v.reason
    assert classify(500, table(INIT, worker(ppid=1), helper())).orphan  # the worker was orphaned too


def test_an_agent_of_another_run_or_started_later_is_no_launcher_of_it():
    other_run = table(INIT, AGENT, worker(run_id="tr-2"), helper())
    assert classify(500, other_run).orphan
    # torchrun's default --rdzv-id is "none" for every job: a job started after the helper cannot be its launcher
    later = Facts(pid=700, ppid=100, start_ticks=5000, ns_pid=700, create_time=5.0, argv=TORCHRUN)
    assert classify(500, table(INIT, later, worker(pid=710, ppid=700, ticks=5100), helper())).orphan


def test_a_library_launcher_of_its_run_keeps_it_alive():
    launcher = Facts(pid=200, ppid=100, start_ticks=900, ns_pid=200, create_time=0.4, argv=("python", "job.py"))
    v = classify(500, table(INIT, launcher, worker(), helper()))
    assert not v.orphan and "launcher of its run (pid 200, python job.py) is alive" in v.reason


def test_an_agent_without_workers_now_may_be_its_runs():
    v = classify(500, table(INIT, AGENT, helper()))  # between restarts, or just after its workers ended
    assert not v.orphan and "without workers now (pid 200" in v.reason
    later = Facts(pid=700, ppid=100, start_ticks=5000, ns_pid=700, create_time=5.0, argv=TORCHRUN)
    assert classify(500, table(INIT, later, helper())).orphan


def test_a_process_of_its_run_under_a_parent_we_cannot_see_is_no_evidence():
    v = classify(500, table(INIT, worker(ppid=0), helper()))
    assert not v.orphan and "outside this PID namespace" in v.reason


# -- what reports may show ---------------------------------------------------------------------

def test_program_name_drops_arguments():
    assert program_name(["/usr/bin/python3", "-u", "/home/u/train.py", "--hf-token", "hf_x"]) == "python3 train.py"
    assert program_name(["python", "-m", "torch.distributed.run", "--rdzv-conf", "secret=1"]) == \
        "python -m torch.distributed.run"
    assert program_name(["python", "-c", "import os; TOKEN='x'"]) == "python -c"
    assert program_name(["/opt/bin/my-trainer", "--api-key", "abc"]) == "my-trainer"
    assert program_name([]) == ""


def test_start_ticks_reads_past_a_command_name_with_spaces_and_parentheses(tmp_path, monkeypatch):
    stat = "4242 (evil) (name x) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 123456 1000 10"
    real_open = open
    fake = tmp_path / "stat"
    fake.write_text(stat)
    monkeypatch.setattr("builtins.open", lambda path, *a, **k: real_open(fake if path == "/proc/4242/stat" else path,
                                                                          *a, **k))
    assert start_ticks(4242) == 123456
    assert start_ticks(os.getpid()) is not None


def test_run_ids_are_the_stages_own_not_those_of_orphans_the_env_stage_listed():
    from types import SimpleNamespace

    from ddplab.lab.run import _run_ids
    from ddplab.records import Report, Verdict
    from ddplab.records.run import StageRecord

    def stage(name, results):
        report = None if results is None else Report(name, None, None, results, Verdict.PASS)
        return StageRecord(name, f"ddplab {name}", Verdict.PASS, "", report=report)

    records = [
        stage("env", SimpleNamespace(orphans=[SimpleNamespace(pid=5, run_id="train-older")])),
        stage("train-shared", SimpleNamespace(session=SimpleNamespace(run_id="train-1"))),
        stage("drills", SimpleNamespace(run_ids=lambda: {"drill-kill_rank-1", "c0ffee-torchrun"})),
        stage("sweep", None),
    ]
    assert _run_ids(records) == {"train-1", "drill-kill_rank-1", "c0ffee-torchrun"}


def test_a_run_directory_is_read_through_the_process_own_root(tmp_path):
    from ddplab.supervision.proc_facts import run_dir_holds

    assert run_dir_holds(os.getpid(), str(tmp_path)) is None  # no run claimed it
    (tmp_path / "run-id").write_text("launch-20261206-010203-abcdef\n")
    assert run_dir_holds(os.getpid(), str(tmp_path)) == "launch-20261206-010203-abcdef"
    assert run_dir_holds(os.getpid(), "relative/dir") is None and run_dir_holds(os.getpid(), None) is None


def test_a_launcher_identity_in_other_digits_is_no_evidence_and_no_crash():
    odd = rank(ppid=1)
    odd.markers[LAUNCHER_PID_ENV] = "²"  # str.isdigit() says yes; int() refuses it
    v = classify(300, table(INIT, odd))
    assert not v.orphan and "without a recorded launcher start time" in v.reason, v
