"""Every drill for real on CPU/gloo: detected, the right culprit, nothing leaked."""

import pytest

from tests.conftest import load_json, run_cli

pytestmark = pytest.mark.slow
TIMEOUT = "6"  # generous: ranks importing torch on 2 busy cores reach init seconds apart


# The two-rank drills with the default settings, run by one `ddplab drill a,b,...` as users and the lab run several
# (README.md, drills): every drill launches its own ranks in its own run directory, so the tests share only the
# command's start-up (its torch import and platform probe), not a drill's run. late-rank is spelt in kebab-case.
# kill_rank and kill_launcher are the lab's quick drills: tests/integration/test_run_and_report.py holds them.
SHARED = ("late-rank", "desync", "oom", "straggler", "interrupt")


def _drill(tmp_path, name, *extra, timeout=TIMEOUT):
    proc, drills = _drills(tmp_path, name, *extra, timeout=timeout)
    return proc, drills[0]


def _drills(tmp_path, names, *extra, timeout=TIMEOUT):
    out = tmp_path / "drills.json"
    proc = run_cli("drill", names, "--timeout", timeout, "--run-dir", str(tmp_path / "runs"), "--json", str(out),
                   *extra, cwd=tmp_path, timeout=600)
    doc = load_json(out)
    return proc, doc["results"]["drills"]


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """(the command, each drill's record by its kebab-case name) of the one run of SHARED."""
    proc, drills = _drills(tmp_path_factory.mktemp("drills"), ",".join(SHARED))
    assert [d["drill"] for d in drills] == [n.replace("-", "_") for n in SHARED], proc.stdout[-3000:]
    return proc, {d["drill"].replace("_", "-"): d for d in drills}


def _passed(shared, name):
    """One shared drill's record, passed: what the command's exit 0 meant when it ran this drill alone."""
    proc, drills = shared
    d = drills[name.replace("_", "-")]
    assert d["verdict"] == "pass", (name, d.get("failed_because"), d["culprit_reason"], d["detected_by"],
                                    d["detect_s"], proc.stdout[-3000:])
    return d


def test_the_command_exits_0_when_every_drill_it_ran_passed(shared):
    proc, drills = shared
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert {d["verdict"] for d in drills.values()} == {"pass"}


@pytest.mark.parametrize("name, mechanism", [
    ("late_rank", ("store timeout", "ddplab supervisor")),
    ("desync", ("collective timeout (gloo)", "ddplab supervisor", "peer connection lost")),
])
def test_fault_is_detected_in_time_with_the_right_culprit(shared, name, mechanism):
    d = _passed(shared, name)
    assert d["detected_by"] in mechanism
    assert d["detect_s"] <= float(TIMEOUT) + 5
    assert 1 in d["culprit_ranks"]  # the victim (last rank) is named
    assert d["leaked_pids"] == []
    assert d["error_excerpt"]


def test_oom_names_the_cap(shared):
    d = _passed(shared, "oom")
    assert d["victim_error_names_cap"] and "cap of" in d["victim_error"]
    assert d["culprit_ranks"] == [1] and d["leaked_pids"] == []


def test_straggler_is_named_by_the_straggler_watch_and_inflates_the_others_tail_latency(shared):
    """The watch `ddplab launch` runs names the paused rank, and nobody in the run without pauses."""
    d = _passed(shared, "straggler")
    assert (d["stragglers_named"], d["baseline_named"], d["culprit_ranks"]) == ([1], [], [1])
    assert d["detected_by"] == "ddplab straggler watch" and 0 <= d["detect_s"] <= 60
    assert d["stragglers"]["findings"][0]["evidence"] and d["stragglers"]["lateness"]
    assert d["inflation"]["p99"] > 1
    assert d["leaked_pids"] == []


def test_interrupt_leaves_nothing(shared):
    d = _passed(shared, "interrupt")
    assert d["report_written"] and d["leaked_pids"] == [] and d["detect_s"] <= float(TIMEOUT) + 5


def test_torchrun_orphans_are_found_and_cleaned(tmp_path):
    proc, d = _drill(tmp_path, "kill_launcher", "--launcher", "torchrun")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert len(d["orphans_after_kill"]) == 2  # plain torchrun leaves its workers running
    assert d["cleaned"] and d["leaked_pids"] == []


@pytest.mark.parametrize("argv, fragment", [
    (["drill", "kill-rnak"], 'maybe you meant "kill_rank"'),
    (["drill", "stall", "--nproc", "1"], "at least 2 ranks"),
    (["drill", "stall", "--victim", "5"], "--victim 5 is not a rank"),
    (["drill", "kill_launcher", "--launcher", "slurm"], 'unknown launcher "slurm"'),
])
def test_drill_bad_input_exits_2(tmp_path, argv, fragment):
    proc = run_cli(*argv, cwd=tmp_path)
    assert proc.returncode == 2 and fragment in proc.stderr
