"""Every command's --json keeps its keys across the redesign (issue 11): the key paths each golden command
writes now are the ones it wrote before (keys.json, from make_keys.py on the code before the redesign)."""

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


SHARED = ("sweep", "train", "ceiling", "contention")  # run once per session, for other modules too (tests/conftest.py golden_run)


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
        done = run_cli(*argv, "--json", str(out / f"{name}.json"), cwd=out)
        (out / f"{name}.terminal").write_text(done.stdout + done.stderr)
    return out


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_keeps_its_json_keys(outputs, name):
    path = outputs / f"{name}.json"
    assert path.exists(), f"ddplab {name} wrote no JSON"
    assert_keys_kept(name, json.loads(path.read_text()))


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_terminal_never_says_none_null_or_nan(outputs, name):
    """What the golden command printed, and its report rendered again with its check rows (tests/unit/
    test_terminal_words.py renders the fixtures the same way)."""
    from ddplab.catalog import report_from_json
    from tests.unit.test_terminal_words import missing_words, terminal_text

    assert missing_words((outputs / f"{name}.terminal").read_text()) == []
    report = report_from_json(json.loads((outputs / f"{name}.json").read_text()))
    assert missing_words(terminal_text(report)) == []
