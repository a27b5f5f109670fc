"""Ctrl+C and SIGTERM at any point: an orderly stop, a report marked interrupted, quiet ranks,
and nothing left running. Signals are sent once the target is observably ready (run directory,
spawned ranks, pid files), never after a guessed sleep."""

import glob
import os
import signal
from pathlib import Path

import psutil
import pytest

from tests.conftest import load_json
from tests.stopped_runs import (IDLE_RANKS, alive, child_launcher_pid_files, finish, processes_under, settle,
                                spawned_ranks, start, wait_for)

pytestmark = pytest.mark.slow


def ctrl_c(proc, target: str, tmp_path) -> str:
    """SIGINT to the launcher alone, or to its whole process group (a terminal's Ctrl+C); its output once done."""
    if target == "launcher":
        os.kill(proc.pid, signal.SIGINT)
    else:
        os.killpg(proc.pid, signal.SIGINT)
    return finish(proc, tmp_path)


def rank_logs(run_dir: Path) -> str:
    return "".join(Path(f).read_text(errors="replace") for f in glob.glob(f"{run_dir}/logs/*/*/*/std*.log"))


def test_sigterm_before_any_rank_started_still_writes_an_interrupted_report(tmp_path):
    run_dir, report = tmp_path / "run", tmp_path / "train.json"
    proc = start(["train", "--nproc", "2", "--steps", "1000000", "--run-dir", str(run_dir), "--json", str(report)],
                 tmp_path)
    wait_for(run_dir.is_dir, proc)  # planned, run directory made, no rank yet
    os.kill(proc.pid, signal.SIGTERM)
    out = finish(proc, tmp_path)
    assert proc.returncode == 130, out[-3000:]  # a run stopped by a signal: report written, exit 130
    results = load_json(report)["results"]
    assert results["interrupted"] is True and "SIGTERM" in results["launcher_error"]
    assert "Traceback" not in out
    assert settle(lambda: processes_under(run_dir)) == []


@pytest.mark.parametrize("target", ["launcher", "process group"])
def test_sigint_while_ranks_start_is_an_orderly_quiet_stop(tmp_path, target):
    """The launcher stops the ranks (with SIGTERM); ranks print no KeyboardInterrupt, even when the
    terminal's Ctrl+C reaches them too (the whole process group) while they still import torch."""
    run_dir, report = tmp_path / "run", tmp_path / "train.json"
    proc = start(["train", "--nproc", "2", "--steps", "1000000", "--run-dir", str(run_dir), "--json", str(report)],
                 tmp_path)
    ranks = wait_for(lambda: len(spawned_ranks(proc)) == 2 and spawned_ranks(proc), proc)
    out = ctrl_c(proc, target, tmp_path)
    assert proc.returncode == 130, out[-3000:]
    assert load_json(report)["results"]["interrupted"] is True
    assert "KeyboardInterrupt" not in out and "Traceback" not in out, out[-3000:]
    assert "KeyboardInterrupt" not in rank_logs(run_dir)
    assert settle(lambda: alive(ranks)) == []
    assert settle(lambda: processes_under(run_dir)) == []


def test_sigint_to_a_drill_stops_its_child_launcher_and_reaps_everything(tmp_path):
    """kill_launcher runs `ddplab train` as a child launcher; stopping the drill while that child's
    ranks run must end them all and still write the drill report, marked interrupted."""
    runs, report = tmp_path / "runs", tmp_path / "drill.json"
    proc = start(["drill", "kill_launcher", "--timeout", "6", "--run-dir", str(runs), "--json", str(report)],
                 tmp_path)
    wait_for(lambda: len(child_launcher_pid_files(runs)) == 2, proc)
    tree = psutil.Process(proc.pid).children(recursive=True)
    os.kill(proc.pid, signal.SIGINT)
    out = finish(proc, tmp_path)
    assert proc.returncode == 130, out[-3000:]
    doc = load_json(report)
    assert doc["results"]["interrupted"] is True and doc["verdict"] == "fail"
    assert doc["results"]["drills"][0]["interrupted"] is True
    assert settle(lambda: alive(tree)) == []
    assert settle(lambda: processes_under(runs)) == []


def test_sigterm_during_the_labs_drills_exits_130_with_a_partial_report_and_nothing_left(tmp_path):
    out_dir = tmp_path / "lab"
    # --only: the lab's own path to its drills (env, a sweep, the drills, the leftover check), without the stages
    # between that this test does not need (they cost the 2-core suite 25 s)
    proc = start(["run", "--profile", "quick", "--only", "sweep,drill", "--out", str(out_dir)], tmp_path)
    seen: dict[int, psutil.Process] = {}  # every process the lab started, and the run id it carried
    run_ids: set[str] = set()

    def drills_child_running():
        try:
            tree = psutil.Process(proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return False
        for child in tree:
            if child.pid not in seen:
                seen[child.pid] = child
                try:
                    run_ids.add(child.environ().get("DDPLAB_RUN_ID") or "")
                except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                    pass
        return len(child_launcher_pid_files(out_dir / "drills")) == 2

    wait_for(drills_child_running, proc, timeout=420, step=0.1)
    drills_child_running()
    os.kill(proc.pid, signal.SIGTERM)
    out = finish(proc, tmp_path)
    assert proc.returncode == 130, out[-3000:]
    doc = load_json(out_dir / "report.json")
    assert doc["results"]["interrupted"] is True
    names = [s["name"] for s in doc["results"]["stages"]]
    assert names == ["env", "sweep", "drills", "leftovers"]  # the kinds asked for, the drills cut short
    assert doc["config"]["only"] == ["sweep", "drill"]
    assert (out_dir / "report.html").exists()
    run_ids.discard("")
    assert run_ids, "the lab's ranks were never seen"
    assert settle(lambda: alive(list(seen.values()))) == []
    assert settle(lambda: [p for rid in run_ids for p in _carrying(rid)]) == []
    assert settle(lambda: processes_under(out_dir)) == []


def _carrying(run_id: str) -> list[int]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("DDPLAB_RUN_ID") == run_id and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found




@pytest.mark.parametrize("target", ["launcher", "process group", "hang-up"])
def test_ctrl_c_of_a_launch_blames_no_rank(tmp_path, target):
    """Ctrl+C of `ddplab launch` while its ranks were in user code: elastic ends them with SIGTERM for the stop,
    which the judge once took for their own deaths ('rank 0 ended by SIGTERM; rank 1 ..., the first to fail').
    SIGHUP (the terminal closed) is the same stop: elastic once handled it, ended every rank with it, and the
    judge blamed them all ('ended by SIGHUP, the first to fail')."""
    (tmp_path / "idle.py").write_text(IDLE_RANKS)
    out_dir = tmp_path / "job"
    proc = start(["launch", "--nproc-per-node", "2", "--out", str(out_dir), "idle.py"], tmp_path)
    wait_for(lambda: len(list(tmp_path.glob("ready.*"))) == 2, proc)
    if target == "hang-up":
        os.kill(proc.pid, signal.SIGHUP)
        out = finish(proc, tmp_path)
    else:
        out = ctrl_c(proc, target, tmp_path)
    assert proc.returncode == 130, out[-3000:]
    results = load_json(out_dir / "report.json")["results"]
    assert results["outcome"] == "interrupted" and results["culprit"] is None, results["culprit"]
    # each rank ended by the teardown's SIGTERM; under load elastic may reap one before its status is read, which
    # the report says as it is (CI, 2026-12-02: rank 0 "ended (status not seen)")
    assert [r["rank"] for r in results["ranks"]] == [0, 1]
    for r in results["ranks"]:
        assert r["stopped_by_launcher"] or r["ended_by"] == "ended (status not seen)", r
    assert "culprit" not in out and "first to fail" not in out
    assert settle(lambda: processes_under(out_dir)) == []
