"""Reading a report back (issue 18): every field's type, the file's size before it is read, control characters
in what is printed, and verdicts judged again from the data instead of taken from the file."""

import copy
import json
import resource
from pathlib import Path

import pytest

from ddplab.cli import main
from ddplab.job.config import TORCHRUN_VALUE_TYPES
from ddplab.errors import UsageError, printable
from ddplab.records import Verdict
from ddplab.reading.catalog import read_report, report_from_document as report_from_json
from ddplab.reading.catalog import MAX_INPUT_BYTES, read_bytes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RUN = json.loads((FIXTURES / "report-quick-cpu.json").read_text())
LAUNCH = json.loads((FIXTURES / "launch-report-skipped-collective.json").read_text())


def _refused(doc, change) -> str:
    doc = copy.deepcopy(doc)
    change(doc)
    with pytest.raises(UsageError) as caught:
        report_from_json(doc, "r.json")
    assert caught.value.reference == "invalid-report"
    return caught.value.message


def _stage(doc, name) -> dict:
    return next(s for s in doc["results"]["stages"] if s["name"] == name)["report"]


LAUNCH_FIELDS = [
    (lambda d: d["config"]["torchrun"].update(master_port="29500"),
     'field config.torchrun.master_port must be an integer, but it is the string "29500"'),
    (lambda d: d["config"]["torchrun"].update(standalone="false"),
     'field config.torchrun.standalone must be true or false, but it is the string "false"'),
    (lambda d: d["config"]["torchrun"].update(monitor_interval="0.1"),
     'field config.torchrun.monitor_interval must be a finite number, but it is the string "0.1"'),
    (lambda d: d["config"]["torchrun"].update(duplicate_stdout_filters="x"),
     'field config.torchrun.duplicate_stdout_filters must be a list, but it is the string "x"'),
    (lambda d: d["results"].update(nothing_left_running="yes"),  # derived: not read, still checked
     'field results.nothing_left_running must be true or false, but it is the string "yes"'),
]


@pytest.mark.parametrize("change, message", LAUNCH_FIELDS, ids=[m.split()[1] for _, m in LAUNCH_FIELDS])
def test_a_launch_report_refuses_a_string_for_a_number_or_a_switch(change, message):
    assert _refused(LAUNCH, change) == f"r.json: {message}"


def test_an_option_a_newer_torch_adds_is_read_as_it_is():
    doc = copy.deepcopy(LAUNCH)
    doc["config"]["torchrun"]["option_of_torch_3"] = {"any": "value"}
    assert read_back(doc).config.torchrun["option_of_torch_3"] == {"any": "value"}


def read_back(doc):
    return report_from_json(json.loads(json.dumps(doc)), "r.json")


def test_the_torchrun_option_types_are_the_installed_torchs():
    """Every option torchrun's parser has is in the table, with the type its parser gives the value."""
    from torch.distributed.run import get_args_parser

    for action in get_args_parser()._actions:
        if action.dest in ("help", "training_script", "training_script_args"):
            continue
        expected = TORCHRUN_VALUE_TYPES.get(action.dest)
        assert expected is not None, f"torchrun's --{action.dest} is not in config.TORCHRUN_VALUE_TYPES"
        if action.nargs == 0:
            assert expected is bool, action.dest
        elif getattr(action.type, "__name__", "") == "comma_separated_list":
            assert expected == list[str], action.dest
        elif action.type in (int, float):
            assert expected in (action.type, action.type | None), action.dest
        else:
            assert expected == str | None, action.dest


RUN_FIELDS = [
    (lambda d: _stage(d, "storm")["results"]["ranks"][0]["per_op_us"].update(p50="1.0"),
     "field results.stages[2].report.results.ranks[0].per_op_us.p50 must be a finite number, but it is the string "
     '"1.0"'),
    (lambda d: _stage(d, "sweep")["results"]["ranks"][0]["rows"][0].update(num_wrong="0"),
     'field results.stages[3].report.results.ranks[0].rows[0].num_wrong must be an integer, but it is the string "0"'),
    (lambda d: _stage(d, "train-shared")["results"]["placement"].update(device_indices=["0", "0"]),
     'field results.stages[1].report.results.placement.device_indices[0] must be an integer, but it is the string "0"'),
    (lambda d: _stage(d, "contention")["results"]["ranks"][0]["together"].update(tflops=True),
     "field results.stages[5].report.results.ranks[0].together.tflops must be a finite number, but it is true"),
]


@pytest.mark.parametrize("change, message", RUN_FIELDS, ids=[m.split()[1] for _, m in RUN_FIELDS])
def test_a_run_report_refuses_a_string_in_its_ranks_results_and_placement(change, message):
    assert _refused(RUN, change).startswith(f"r.json: {message}")


def test_every_report_of_the_fixtures_still_reads_back():
    for path in FIXTURES.glob("*.json"):
        assert read_report(str(path)).command in ("run", "launch"), path


# --- the size, before anything is read ---------------------------------------------------------------------

def test_a_file_over_the_cap_is_refused_before_it_is_read(tmp_path):
    huge = tmp_path / "huge.json"
    with huge.open("wb") as f:  # 3 GB, sparse: nothing of it is on the disk
        f.truncate(3 * 1024**3)
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(UsageError) as caught:
        read_bytes(str(huge))
    assert caught.value.reference == "file-too-large"
    assert caught.value.message == (f"{huge} is 3,221,225,472 bytes; a ddplab report or nccl-tests output is at "
                                    "most 33,554,432 bytes (32 MiB)")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before < 100 * 1024  # KiB: nothing read


def test_the_cap_is_far_above_the_largest_report_ddplab_wrote():
    largest = max(p.stat().st_size for p in (Path(__file__).resolve().parents[2] / "docs/results").rglob("*.json"))
    assert largest * 10 < MAX_INPUT_BYTES


def test_a_file_at_the_cap_is_read(tmp_path):
    path = tmp_path / "at_cap.json"
    path.write_bytes(b"[" + b" " * (MAX_INPUT_BYTES - 2) + b"]")
    assert len(read_bytes(str(path))) == MAX_INPUT_BYTES


# --- control characters in what reaches the terminal -------------------------------------------------------

def test_printable_escapes_what_a_terminal_would_act_on():
    assert printable("a\x1b[31mb\x07c\nd\x9b\u202ee\tf é ✓") == "a\\x1b[31mb\\x07c\\nd\\x9b\\u202ee\tf é ✓"


def test_a_key_with_terminal_escapes_is_printed_escaped(tmp_path, capsys):
    doc = copy.deepcopy(RUN)
    _stage(doc, "train-shared")["results"]["placement"]["env"] = {"\x1b[2J\x1b]0;owned\x07": 5}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    for argv in (["report", str(path)], ["compare", str(path), str(FIXTURES / "report-quick-cpu.json")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "\x1b" not in err and "\x07" not in err
        assert "placement.env.\\x1b[2J\\x1b]0;owned\\x07 must be a string, but it is 5" in err


def test_compare_prints_an_op_name_with_escapes_escaped(tmp_path, capsys):
    text = ("#  Collective test starting: all_reduce_perf\n"
            "           8             2     float     sum      -1    20.00    0.00    0.00      0    19.00    0.00"
            "    0.00      0\n")
    a = tmp_path / "a.txt"
    a.write_text(text)
    b = tmp_path / "b\x1b[31m.txt"
    b.write_text(text)
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "b\\x1b[31m.txt" in out


# --- verdicts judged again from the data -------------------------------------------------------------------

def test_a_run_reports_stored_pass_does_not_stand_beside_wrong_data(tmp_path):
    doc = copy.deepcopy(RUN)
    sweep = _stage(doc, "sweep")["results"]
    for row in sweep["rows"]:
        row["num_wrong"] = 7
    sweep["num_wrong_total"] = 7 * len(sweep["rows"])
    assert doc["verdict"] == "pass" and all(c["verdict"] != "fail" for c in doc["results"]["checks"])
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    report = read_report(str(path))
    sweep = next(s for s in report.results.stages if s.name == "sweep")
    assert sweep.verdict == Verdict.FAIL and "#wrong 63" in sweep.summary
    rows = {(c.stage, c.check): c for c in report.results.checks}
    assert rows[("sweep", "collective results correct")].verdict == Verdict.FAIL
    assert report.verdict == Verdict.FAIL
    assert main(["report", str(path), "--out", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert "id='overall-verdict'>FAIL<" in page


def test_a_stored_check_row_is_replaced_by_the_one_the_data_gives(tmp_path):
    doc = copy.deepcopy(RUN)
    doc["results"]["checks"][0].update(verdict="fail", value="tampered")
    report = report_from_json(doc, "r.json")
    assert report.verdict == Verdict.PASS and "tampered" not in {c.value for c in report.results.checks}


def test_a_leftover_stage_that_lists_processes_fails_whatever_it_stored():
    doc = copy.deepcopy(RUN)
    leftovers = next(s for s in doc["results"]["stages"] if s["name"] == "leftovers")
    leftovers.update(left_pids=[4242], verdict="pass")
    report = report_from_json(doc, "r.json")
    assert report.results.stages[-1].verdict == Verdict.FAIL and report.verdict == Verdict.FAIL


def test_a_single_measurements_stored_verdict_is_judged_again():
    sweep = copy.deepcopy(_stage(RUN, "sweep"))
    sweep["results"]["rows"][0]["num_wrong"] = 7
    sweep["results"]["num_wrong_total"] = 7
    assert sweep["verdict"] == "pass"
    assert report_from_json(sweep, "s.json").verdict == Verdict.FAIL


def test_a_total_edited_apart_from_its_rows_is_refused():
    sweep = copy.deepcopy(_stage(RUN, "sweep"))
    sweep["results"]["rows"][0]["num_wrong"] = 7  # the total still says 0: the verdict would read 0
    with pytest.raises(UsageError) as caught:
        report_from_json(sweep, "s.json")
    assert caught.value.message == ("s.json: field results.num_wrong_total must be a valid value (0 is not the rows' "
                                    "#wrong summed (7)), but it is 0")
