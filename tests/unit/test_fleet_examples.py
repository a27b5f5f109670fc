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


def test_the_npd_monitor_config_names_the_plugin_and_its_condition():
    config = json.loads((FLEET / "node-problem-detector" / "ddplab-check-monitor.json").read_text())
    assert config["plugin"] == "custom" and config["pluginConfig"]["concurrency"] == 1
    (rule,) = config["rules"]
    assert rule["type"] == "permanent" and rule["condition"] == config["conditions"][0]["type"]
    assert Path(rule["path"]).name == "ddplab-npd-plugin.sh"


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

    proc, drained = _slurm(tmp_path / "bad", "--inject", "wrong:all_reduce")
    assert proc.returncode == 1, proc.stderr
    lines = drained.splitlines()
    assert lines[:3] == ["update", "NodeName=gpu017", "State=DRAIN"]
    assert lines[3].startswith("Reason=DDPLAB CRITICAL - 1 critical of 22 checks: sweep collective results correct")
    assert "|" not in lines[3] and len(lines[3]) <= len("Reason=") + 200, "no perfdata in the reason"


@pytest.mark.skipif(not shutil.which("bash"), reason="needs bash")
def test_npd_plugin_prints_one_message_line_with_npds_exit_codes(tmp_path):
    plugin = FLEET / "node-problem-detector" / "ddplab-npd-plugin.sh"
    for extra, code, start in (((), 0, "OK: "), (("--inject", "wrong:all_reduce"), 1, "CRITICAL: ")):
        proc = subprocess.run(["bash", str(plugin)], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "DDPLAB": str(_fake_ddplab(tmp_path, *extra)),
                                   "DDPLAB_STATE": str(tmp_path / "state")})
        assert proc.returncode == code and proc.stdout.startswith(start) and proc.stdout.count("\n") == 1, \
            proc.stdout + proc.stderr
