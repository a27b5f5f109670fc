"""Reading a report imports no lab: `ddplab report` and `ddplab compare` load the records, the kind that judges the
report again and the page, never what runs a measurement (the lab, a session, the supervisor, the ranks' side)."""

import json
import subprocess
import sys

import pytest

from tests.crafted_reports import load_fixture

# What runs a measurement or a job; reading a report needs none of it.
RUNNERS = ("ddplab.lab", "ddplab.job", "ddplab.supervision", "ddplab.workloads", "ddplab.drills", "ddplab.check",
           "ddplab.cluster.rendezvous", "ddplab.cluster.exposure")
# One measurement's report read, judged again and drawn (39 for `report`, 39 for `compare`): the CLI with its
# option machinery and output options (ddplab, cli, errors, commands, help, options, the command: 7), basics/ (8),
# the records a storm holds (records, codec, core, session with its figures, placement and supervision, storm with
# its library_engine and machines, config: 11), the platform package for the Platform and the device and backend
# names a config is checked against (platform, facts, vendors: 3), the kind with its checks and the registry that
# judges by kind (measurements, storm, checks: 3), the catalog (2) and the page (5); `compare` loads its own
# reading, its records and the spike rule instead of the page.
MOST_MODULES = 39

SHOW_MODULES = ("import sys\nfrom ddplab.cli import main\ncode = main(sys.argv[1:])\n"
                "print(' '.join(sorted(m for m in sys.modules if m == 'ddplab' or m.startswith('ddplab.'))))\n"
                "sys.exit(code)\n")


def _imported(*argv: str, cwd) -> tuple[int, list[str]]:
    """The exit code of `ddplab ARGV` and the ddplab modules it imported, in a process of its own."""
    done = subprocess.run([sys.executable, "-c", SHOW_MODULES, *argv], capture_output=True, text=True, cwd=cwd,
                          timeout=120)
    return done.returncode, done.stdout.strip().splitlines()[-1].split()  # the command's own lines come first


@pytest.fixture(scope="module")
def storm_report(tmp_path_factory):
    """The storm stage of the lab's fixture as a report of its own, as `ddplab storm --json` writes one."""
    stage = next(s for s in load_fixture()["results"]["stages"] if s["name"] == "storm")
    path = tmp_path_factory.mktemp("storm") / "storm.json"
    path.write_text(json.dumps(stage["report"]))
    return path


def _runners(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == r or m.startswith(r + ".") for r in RUNNERS)]


@pytest.mark.parametrize("command", ["report", "compare"])
def test_reading_a_report_imports_no_runner(storm_report, tmp_path, command):
    argv = [command, str(storm_report), *(["--out", str(tmp_path / "page.html")] if command == "report"
                                          else [str(storm_report)])]
    code, modules = _imported(*argv, cwd=tmp_path)
    assert code == 0 and "ddplab.measurements.storm" in modules and "ddplab.reading.catalog" in modules
    assert _runners(modules) == []
    assert len(modules) <= MOST_MODULES, modules
