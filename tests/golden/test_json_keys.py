"""Every command's --json keeps its keys across the redesign (issue 11): the key paths each golden command
writes now are the ones it wrote before (keys.json, from make_keys.py on the code before the redesign).

The same runs show where each report goes: a command that starts ranks leaves its report.json in its run
directory, the same document as its --json copy; `--format json` is that document alone on standard output."""

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.golden.commands import COMMANDS, stable
from tests.golden.keys import key_paths

pytestmark = pytest.mark.slow
HERE = Path(__file__).resolve().parent
GOLDEN = json.loads((HERE / "keys.json").read_text())


def assert_keys_kept(name: str, doc: dict) -> None:
    now = stable(key_paths(doc), name)
    before = stable(set(GOLDEN[name]), name)
    assert not before - now, f"{name}: keys lost: {sorted(before - now)}"
    assert not now - before, f"{name}: keys added without updating tests/golden/keys.json: {sorted(now - before)}"


# run once per session, for other modules too (tests/conftest.py golden_run)
SHARED = ("sweep", "train", "storm", "ceiling", "contention")
ON_STDOUT = ("drill",)  # run with --format json: the report on standard output, what the command shows on stderr
WITH_RUN_DIR = ("train", "storm", "sweep", "ceiling", "contention", "drill")  # the commands that start ranks


@pytest.fixture(scope="module")
def outputs(tmp_path_factory, golden_run):
    out = tmp_path_factory.mktemp("golden")
    for name in SHARED:
        done, report = golden_run(name)
        if report.exists():
            shutil.copy(report, out / f"{name}.json")
        (out / f"{name}.terminal").write_text(done.stdout + done.stderr)
    for name, argv in COMMANDS.items():
        if name in SHARED:
            continue
        argv = [a.format(fixtures=HERE.parent / "fixtures", out=out) for a in argv]
        if name in ON_STDOUT:
            done = run_cli(*argv, "--format", "json", cwd=out)
            (out / f"{name}.json").write_text(done.stdout)
            (out / f"{name}.terminal").write_text(done.stderr)
        else:
            done = run_cli(*argv, "--json", str(out / f"{name}.json"), cwd=out)
            (out / f"{name}.terminal").write_text(done.stdout + done.stderr)
    for name in WITH_RUN_DIR:  # what each left in its run directory, kept before another test's tmp_path goes
        kept = run_dir_of(out / f"{name}.json")
        if kept is not None and (kept / "report.json").exists():
            shutil.copy(kept / "report.json", out / f"{name}.run-dir.json")
    return out


def run_dir_of(report: Path) -> Path | None:
    """The run directory a command's report names: its ranks' session's (flattened into the results), or the
    drills' own (--run-dir)."""
    if not report.exists():
        return None
    doc = json.loads(report.read_text())
    return Path(doc["results"].get("run_dir") or doc["config"]["run_dir"])


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_keeps_its_json_keys(outputs, name):
    path = outputs / f"{name}.json"
    assert path.exists(), f"ddplab {name} wrote no JSON"
    assert_keys_kept(name, json.loads(path.read_text()))


@pytest.mark.parametrize("name", WITH_RUN_DIR)
def test_a_command_that_starts_ranks_leaves_its_report_in_its_run_directory(outputs, name):
    """Written whether or not --json was given, the same document as the copy (a file, or standard output), and
    said where in the terminal."""
    kept = outputs / f"{name}.run-dir.json"
    assert kept.exists(), f"ddplab {name} left no report.json in its run directory"
    assert kept.read_text() == (outputs / f"{name}.json").read_text()
    run_dir = run_dir_of(outputs / f"{name}.json")
    assert f"report: {run_dir / 'report.json'}" in (outputs / f"{name}.terminal").read_text()


def test_format_json_is_the_report_alone_on_stdout_and_the_terminal_goes_to_stderr(outputs):
    for name in ON_STDOUT:
        assert json.loads((outputs / f"{name}.json").read_text())["command"] == name  # stdout: the JSON alone
        assert "verdict: " in (outputs / f"{name}.terminal").read_text()  # stderr: what the command shows


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_terminal_never_says_none_null_or_nan(outputs, name):
    """What the golden command printed, and its report rendered again with its check rows (tests/unit/
    test_terminal_words.py renders the fixtures the same way)."""
    from ddplab.reading.catalog import report_from_json
    from tests.unit.test_terminal_words import missing_words, terminal_text

    assert missing_words((outputs / f"{name}.terminal").read_text()) == []
    report = report_from_json(json.loads((outputs / f"{name}.json").read_text()))
    assert missing_words(terminal_text(report)) == []
