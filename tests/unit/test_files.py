"""Result files are written atomically, outputs are checked before a launch, a full disk is named."""

import json

import pytest

from ddplab.basics import files
from ddplab.errors import ExitCode, UsageError
from tests.tmpfs import fill, small_disk, temporaries  # noqa: F401 (small_disk: a fixture)


def test_atomic_write_replaces_the_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("old")
    files.write_text_atomic(target, "new")
    assert target.read_text() == "new"
    assert temporaries(tmp_path) == []


def test_write_json_on_a_full_disk_keeps_the_old_report_and_names_the_cause(small_disk):
    target = small_disk / "report.json"
    files.write_json({"verdict": "pass"}, target)
    fill(small_disk)
    big = {"verdict": "fail", "samples": ["x" * 1000] * 400}  # ~400 KB: cannot fit
    with pytest.raises(files.DiskFull) as err:
        files.write_json(big, target)
    assert err.value.exit_code == ExitCode.ENVIRONMENT
    assert err.value.message == f"no space left on device while writing {target}"
    assert json.loads(target.read_text()) == {"verdict": "pass"}  # the old file, whole
    assert temporaries(small_disk) == []


def test_create_exclusive_lets_exactly_one_writer_win(tmp_path):
    claim = tmp_path / "run-id"
    assert files.create_exclusive(claim, "first\n")
    assert not files.create_exclusive(claim, "second\n")
    assert claim.read_text() == "first\n"
    assert temporaries(tmp_path) == []


def test_output_file_checks_refuse_a_directory_and_a_file_used_as_directory(tmp_path):
    with pytest.raises(UsageError) as err:
        files.check_output_file(tmp_path, "--json")
    assert err.value.reference == "output-is-a-directory" and str(tmp_path) in err.value.message
    (tmp_path / "plain").write_text("x")
    with pytest.raises(UsageError) as err:
        files.check_output_file(tmp_path / "plain" / "sub" / "r.json", "--json")
    assert err.value.reference == "output-not-writable"
    files.check_output_file(tmp_path / "r.json", "--json")  # in an existing directory: fine
    assert temporaries(tmp_path) == []


@pytest.mark.parametrize("parts", [("new", "r.json"), ("new", "dir", "r.json")])
def test_an_output_file_whose_directory_is_missing_is_refused_not_created(tmp_path, parts):
    """Issue 18: `--json /nonexistent/dir/x.json` created /nonexistent/dir."""
    path = tmp_path.joinpath(*parts)
    with pytest.raises(UsageError) as err:
        files.check_output_file(path, "--json")
    assert err.value.reference == "output-directory-missing"
    assert err.value.message == (f"--json {path}: the directory {path.parent} does not exist; name a file in an "
                                 "existing directory (ddplab does not create it)")
    assert not (tmp_path / "new").exists() and temporaries(tmp_path) == []


def test_a_relative_output_file_in_the_working_directory_is_fine(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    files.check_output_file("r.json", "--json")
    with pytest.raises(UsageError) as err:
        files.check_output_file("typo/r.json", "--json")
    assert "the directory typo does not exist" in err.value.message


def test_output_checks_name_a_full_disk(small_disk):
    fill(small_disk)
    with pytest.raises(files.DiskFull):
        files.check_output_file(small_disk / "r.json", "--json")
    with pytest.raises(files.DiskFull):
        files.check_output_dir(small_disk / "run", "--run-dir")
