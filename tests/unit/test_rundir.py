"""One directory holds one run: used directories are refused, default names never collide."""

from pathlib import Path

import pytest

from ddplab.lab import run as lab
from ddplab.commands import run as run_command
from ddplab.errors import ExitCode, UsageError
from ddplab.basics.rundir import RunDir


def test_a_run_directory_that_holds_a_run_is_refused(tmp_path):
    first = RunDir.create(str(tmp_path / "run"), "train")
    with pytest.raises(UsageError) as err:
        RunDir.create(str(tmp_path / "run"), "train")
    assert err.value.exit_code == ExitCode.USAGE and err.value.reference == "run-dir-in-use"
    assert first.run_id in err.value.message  # names the run that holds it
    assert (tmp_path / "run" / "run-id").read_text().strip() == first.run_id


def test_an_earlier_runs_directory_is_refused_too(tmp_path):
    (tmp_path / "old" / "pids").mkdir(parents=True)  # written by a ddplab without run-id files
    with pytest.raises(UsageError):
        RunDir.create(str(tmp_path / "old"), "train")


def test_an_empty_existing_directory_is_accepted(tmp_path):
    run = RunDir.create(str(tmp_path), "train")
    assert run.path == tmp_path.resolve() and (tmp_path / "pids").is_dir()


def test_default_run_directories_are_unique_within_one_second(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runs = [RunDir.create(None, "train") for _ in range(5)]
    assert len({r.path for r in runs}) == 5
    outs = [lab.claim_out_dir(None) for _ in range(5)]  # `ddplab run` without --out
    assert len(set(outs)) == 5 and all(Path(o).is_dir() for o in outs)


def test_run_refuses_an_out_directory_that_holds_a_run(tmp_path):
    lab.claim_out_dir(str(tmp_path / "lab"))
    with pytest.raises(UsageError) as err:
        run_command.check_out_dir(tmp_path / "lab")
    assert err.value.reference == "run-dir-in-use"
    (tmp_path / "older").mkdir()
    (tmp_path / "older" / "report.json").write_text("{}")  # an earlier lab's report
    with pytest.raises(UsageError):
        run_command.check_out_dir(tmp_path / "older")
    run_command.check_out_dir(tmp_path / "fresh")  # a new directory is fine
