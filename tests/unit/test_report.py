"""The JSON contract and the numbers derived for it."""

import json
from pathlib import Path

import pytest

from ddplab import measurements
from ddplab.records import SCHEMA_VERSION, RecordError, Report, Verdict
from ddplab.measurements import train
from ddplab.records.session import Distribution, percentile
from ddplab.records.train import TrainRecord
from ddplab.reading.catalog import report_from_json
from tests.unit.fake_sessions import session_record


def test_document_has_contract_keys():
    doc = Report("train", {"a": 1}, None, {"x": 1}, Verdict.PASS).to_json()
    assert {"schema_version", "command", "config", "platform", "results", "verdict"} <= set(doc)
    assert doc["schema_version"] == SCHEMA_VERSION and doc["verdict"] == "pass"


def test_a_report_with_an_unknown_verdict_is_refused_when_read():
    doc = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "report-quick-cpu.json").read_text())
    with pytest.raises(RecordError, match="verdict"):
        report_from_json({**doc, "verdict": "ok"})


def test_percentile_is_nearest_rank():
    values = list(range(1, 101))
    assert percentile(values, 50) == 50
    assert percentile(values, 99) == 99
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None


def test_worst_verdict_and_exit_codes():
    assert Verdict.worst([Verdict.PASS, Verdict.WARN, Verdict.PASS]) is Verdict.WARN
    assert Verdict.worst([Verdict.WARN, Verdict.FAIL]) is Verdict.FAIL
    assert Verdict.worst([Verdict.SKIP, Verdict.PASS]) is Verdict.PASS  # a stage that could not run judges nothing
    assert Verdict.WARN.exit_code == 0 and Verdict.FAIL.exit_code == 1


def train_verdict(completed=True, warnings=(), **proofs) -> str:
    proofs = {"params_identical": True, "grad_matches_reference": True, "local_grad_differs": True, **proofs}
    record = TrainRecord(session=session_record(completed=completed, warnings=warnings), **proofs,
                         step_time_us=Distribution.of([100.0, 120.0]), step_time_method="test")
    return measurements.verdict(train, record).value


def test_train_verdict_requires_every_proof():
    assert train_verdict() == "pass"
    assert train_verdict(warnings=["no MPS"]) == "warn"
    assert train_verdict(params_identical=False) == "fail"
    assert train_verdict(grad_matches_reference=False) == "fail"
    assert train_verdict(local_grad_differs=False) == "fail"  # the check could not tell
    assert train_verdict(local_grad_differs=None) == "pass"  # world size 1: not applicable
    assert train_verdict(completed=False, params_identical=None) == "fail"
