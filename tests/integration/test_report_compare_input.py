"""`ddplab report` and `ddplab compare` on files that are not what they claim: wrong types,
missing keys, bad UTF-8, binary, empty. Exit 2 with the file, the field and what it must
be; never a traceback, never a page written."""

import json
import shutil

import pytest

from ddplab.cli import main
from tests.conftest import run_cli
from tests.crafted_reports import FIXTURE, load_fixture


def _doc_with(change) -> bytes:
    doc = load_fixture()
    change(doc)
    return json.dumps(doc).encode()


def _set_verdict(doc):
    doc["verdict"] = 5


def _drop_results(doc):
    del doc["results"]


def _stage_name_list(doc):
    doc["results"]["stages"][0]["name"] = ["env"]


def _sweep_size_text(doc):
    sweep = next(s for s in doc["results"]["stages"] if s["name"] == "sweep")
    sweep["report"]["results"]["rows"][0]["size_bytes"] = "8"


def _stage(doc, name) -> dict:
    return next(s for s in doc["results"]["stages"] if s["name"] == name)["report"]


# Issue 18: fields that were read as whatever they held, a string included: a rank's workload result, the
# placement, a field the record derives itself, the envelope's argv.
def _rank_result_text(doc):
    _stage(doc, "train-shared")["results"]["ranks"][0]["grad_checks"] = "5"


def _placement_text(doc):
    _stage(doc, "train-shared")["results"]["placement"]["host_only"] = "true"


def _derived_text(doc):
    _stage(doc, "storm")["config"]["warmup"] = "5"


def _argv_number(doc):
    doc["argv"] = [1]


BAD_FILES = [
    ("wrong-type", lambda: _doc_with(_set_verdict), "field verdict must be a string, but it is 5"),
    ("missing-key", lambda: _doc_with(_drop_results), "field results is missing; it must be an object"),
    ("nested-wrong-type", lambda: _doc_with(_stage_name_list), "field results.stages[0].name must be a string"),
    ("sweep-row", lambda: _doc_with(_sweep_size_text),
     "field results.stages[3].report.results.rows[0].size_bytes must be a number > 0, but it is the string \"8\""),
    ("bad-utf8", lambda: b'{"schema_version": 1, "command": "run\xff"}', "is not UTF-8 text: byte 0xff at offset 37"),
    ("binary", lambda: b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)), "is a binary file"),
    ("empty", lambda: b"", "is empty"),
    ("whitespace", lambda: b" \n\t\n", "is empty"),
    ("truncated", lambda: FIXTURE.read_bytes()[:500], "is not JSON: "),
    ("a-list", lambda: b"[1, 2]", "field (document) must be a JSON object (a ddplab report), but it is a list"),
    ("nan", lambda: _doc_with(lambda d: d["results"].update(duration_s=float("nan"))),
     "field results.duration_s must be a finite number, but it is NaN"),
    ("rank-result", lambda: _doc_with(_rank_result_text),
     'field results.stages[1].report.results.ranks[0].grad_checks must be an integer, but it is the string "5"'),
    ("placement", lambda: _doc_with(_placement_text),
     'field results.stages[1].report.results.placement.host_only must be true or false, but it is the string "true"'),
    ("derived-field", lambda: _doc_with(_derived_text),
     'field results.stages[2].report.config.warmup must be an integer, but it is the string "5"'),
    ("argv", lambda: _doc_with(_argv_number), "field argv[0] must be a string, but it is 1"),
]


def _write(tmp_path, name, make) -> str:
    path = tmp_path / f"{name}.json"
    path.write_bytes(make())
    return str(path)


def _exit(argv) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


@pytest.mark.parametrize("name, make, message", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_report_refuses_a_bad_file_with_exit_2_naming_what_is_wrong(tmp_path, capsys, name, make, message):
    path = _write(tmp_path, name, make)
    assert _exit(["report", path]) == 2
    err = capsys.readouterr().err
    assert path in err and message in err, err
    assert not list(tmp_path.glob("*.html"))  # nothing rendered


@pytest.mark.parametrize("name, make, message", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_compare_refuses_a_bad_file_on_either_side(tmp_path, capsys, name, make, message):
    good = str(tmp_path / "good.json")
    shutil.copy(FIXTURE, good)
    bad = _write(tmp_path, name, make)
    for argv in (["compare", bad, good], ["compare", good, bad]):
        assert _exit(argv) == 2, argv
        err = capsys.readouterr().err
        assert bad in err and message in err, err


def test_compare_still_reads_a_good_report_against_itself(tmp_path, capsys):
    assert _exit(["compare", str(FIXTURE), str(FIXTURE)]) == 0
    out = capsys.readouterr().out
    # The fixture's host sweep holds a size far off its neighbours: compare names it (WARN), never a slowdown.
    assert "0 slower than A" in out and "0 verdict(s) worse" in out


@pytest.mark.parametrize("command", ["report", "compare"])
def test_a_real_process_exits_2_without_a_traceback(tmp_path, command):
    bad = _write(tmp_path, "bad", lambda: b'{"verdict": "\xff\xfe"}')
    argv = [command, bad] if command == "report" else [command, str(FIXTURE), bad]
    proc = run_cli(*argv, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "is not UTF-8 text" in proc.stderr and "Traceback" not in proc.stderr
