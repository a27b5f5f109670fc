"""examples/fleet: the files an operator copies parse, and the Slurm and node-problem-detector wrappers do what
their comments say, driven by the real `ddplab check` judging the quick lab report (--from-report: no ranks)."""

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ddplab.check import thresholds
from ddplab.check.thresholds import toml
from tests.crafted_reports import FIXTURE

FLEET = Path(__file__).resolve().parents[2] / "examples" / "fleet"
SRC = Path(__file__).resolve().parents[2] / "src"


def test_the_thresholds_file_and_the_configmaps_load():
    t = thresholds.load(str(FLEET / "thresholds.toml"))
    assert [e.count for e in t.entries] == [8, 1, None] and t.entries[-1].device == "*"
    yaml = pytest.importorskip("yaml")
    docs = list(yaml.safe_load_all((FLEET / "kubernetes" / "ddplab-check-daemonset.yaml").read_text()))
    assert [d["kind"] for d in docs] == ["Namespace", "ConfigMap", "DaemonSet"]
    assert thresholds.parse(toml().loads(docs[1]["data"]["thresholds.toml"]), "configmap").entries
    container = docs[2]["spec"]["template"]["spec"]["containers"][0]
    assert "--format nagios" in container["args"][0] and "-le 1" in container["readinessProbe"]["exec"]["command"][2]
    rules = yaml.safe_load((FLEET / "node_exporter" / "ddplab-alerts.yml").read_text())
    assert {r["alert"] for r in rules["groups"][0]["rules"]} >= {"DdplabNodeCritical", "DdplabCheckStale"}


def test_the_npd_monitor_config_names_the_plugin_and_its_conditions():
    config = json.loads((FLEET / "node-problem-detector" / "ddplab-check-monitor.json").read_text())
    # concurrency 1: NPD runs the rules one after the other, in order, so the warning rule reads this round's check
    assert config["plugin"] == "custom" and config["pluginConfig"]["concurrency"] == 1
    conditions = {c["type"]: c for c in config["conditions"]}
    check, warning = config["rules"]
    assert [check["args"], warning["args"]] == [["check"], ["warning"]]
    for rule in (check, warning):
        assert rule["type"] == "permanent" and Path(rule["path"]).name == "ddplab-npd-plugin.sh"
        default = conditions[rule["condition"]]["reason"]
        # NPD: True has the rule's reason, False and Unknown both the condition's default one
        assert rule["reason"] != default and "Passed" not in default and "OK" not in default
    assert check["condition"] != warning["condition"]


def _fake_ddplab(tmp_path: Path, *extra: str) -> Path:
    """A `ddplab` that judges the fixture report (with ``extra`` options) whatever the wrapper asked to run."""
    script = tmp_path / "ddplab"
    script.write_text(f"#!/bin/sh\nPYTHONPATH={SRC}:$PYTHONPATH exec {sys.executable} -m ddplab \"$@\" "
                      f"--from-report {FIXTURE} {' '.join(extra)}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def _slurm(tmp_path: Path, *extra: str, **env) -> tuple[subprocess.CompletedProcess, str]:
    tmp_path.mkdir()
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {tmp_path}/scontrol.args\n")
    scontrol.chmod(0o755)
    proc = subprocess.run(["bash", str(FLEET / "slurm" / "ddplab-healthcheck.sh")], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "DDPLAB": str(_fake_ddplab(tmp_path, *extra)),
                                            "DDPLAB_STATE": str(tmp_path / "state"), "SCONTROL": str(scontrol),
                                            "DDPLAB_LOG": str(tmp_path / "check.log"), "SLURMD_NODENAME": "gpu017",
                                            **env})
    args = tmp_path / "scontrol.args"
    return proc, args.read_text() if args.exists() else ""


@pytest.mark.skipif(not shutil.which("bash"), reason="needs bash")
def test_slurm_wrapper_keeps_a_good_node_and_drains_a_critical_one_with_the_status_line(tmp_path):
    proc, drained = _slurm(tmp_path / "ok")
    assert proc.returncode == 0 and drained == "", proc.stderr
    assert "rc=0 DDPLAB OK - 22 checks passed" in (tmp_path / "ok" / "check.log").read_text()

    proc, drained = _slurm(tmp_path / "warn", "--inject", "slow:all_reduce")
    assert proc.returncode == 0 and drained == "", "a WARNING keeps the node"
    proc, drained = _slurm(tmp_path / "warn-drain", "--inject", "slow:all_reduce", DDPLAB_DRAIN_ON_WARNING="1")
    assert proc.returncode == 1 and "State=DRAIN" in drained

    proc, drained = _slurm(tmp_path / "unknown", "--thresholds", "/nonexistent/fleet.toml")
    assert proc.returncode == 1 and "Reason=DDPLAB UNKNOWN - invalid-thresholds: " in drained
    proc, drained = _slurm(tmp_path / "unknown-kept", "--thresholds", "/nonexistent/fleet.toml",
                           DDPLAB_DRAIN_ON_UNKNOWN="0")
    assert proc.returncode == 0 and drained == "", "kept, and the line logged"
    assert "rc=3 DDPLAB UNKNOWN - " in (tmp_path / "unknown-kept" / "check.log").read_text()

    proc, drained = _slurm(tmp_path / "bad", "--inject", "wrong:all_reduce")
    assert proc.returncode == 1, proc.stderr
    lines = drained.splitlines()
    assert lines[:3] == ["update", "NodeName=gpu017", "State=DRAIN"]
    assert lines[3].startswith("Reason=DDPLAB CRITICAL - 1 critical of 22 checks: sweep collective results correct")
    assert "|" not in lines[3] and len(lines[3]) <= len("Reason=") + 200, "no perfdata in the reason"


@pytest.mark.skipif(not shutil.which("bash"), reason="needs bash")
@pytest.mark.parametrize("extra, status, check_exit, warning_exit", [
    ((), "OK", 0, 0),
    (("--inject", "slow:all_reduce"), "WARNING", 0, 1),
    (("--inject", "wrong:all_reduce"), "CRITICAL", 1, 0),
    (("--thresholds", "/nonexistent/fleet.toml"), "UNKNOWN", 2, 2),
])
def test_npd_plugin_gives_each_status_to_the_condition_that_shows_it(extra, status, check_exit, warning_exit,
                                                                     tmp_path):
    """Exit 1 is NPD's True (the rule's reason, the line as the message), 0 its False (the line dropped), 2 its
    Unknown (the line kept): CRITICAL raises the problem condition, WARNING the degraded one, UNKNOWN makes both
    Unknown with the line saying why."""
    plugin = FLEET / "node-problem-detector" / "ddplab-npd-plugin.sh"
    env = {**os.environ, "DDPLAB": str(_fake_ddplab(tmp_path, *extra)), "DDPLAB_STATE": str(tmp_path / "state")}
    check = subprocess.run(["bash", str(plugin), "check"], capture_output=True, text=True, timeout=120, env=env)
    assert check.returncode == check_exit and check.stdout.startswith(f"{status}: "), check.stdout + check.stderr
    assert check.stdout.count("\n") == 1
    warning = subprocess.run(["bash", str(plugin), "warning"], capture_output=True, text=True, timeout=30, env=env)
    assert warning.returncode == warning_exit, warning.stdout + warning.stderr
    if warning_exit:  # the message NPD keeps: the check's own line
        assert warning.stdout == check.stdout
