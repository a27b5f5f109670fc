"""The JSON contract and the numbers derived for it."""

import pytest

from ddplab import measurements, report
from ddplab.measurements import train
from ddplab.records.session import Distribution
from ddplab.records.train import TrainRecord
from tests.unit.fake_sessions import session_record


def test_document_has_contract_keys():
    doc = report.document("train", {"a": 1}, {"device_type": "cpu"}, {"x": 1}, "pass")
    assert {"schema_version", "command", "config", "platform", "results", "verdict"} <= set(doc)
    assert doc["schema_version"] == report.SCHEMA_VERSION


def test_document_rejects_unknown_verdict():
    with pytest.raises(ValueError):
        report.document("train", {}, None, {}, "ok")


def test_percentile_is_nearest_rank():
    values = list(range(1, 101))
    assert report.percentile(values, 50) == 50
    assert report.percentile(values, 99) == 99
    assert report.percentile([7.0], 99) == 7.0
    assert report.percentile([], 50) is None


def test_worst_verdict_and_exit_codes():
    assert report.worst(["pass", "warn", "pass"]) == "warn"
    assert report.worst(["warn", "fail"]) == "fail"
    assert report.exit_code("warn") == 0 and report.exit_code("fail") == 1


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
