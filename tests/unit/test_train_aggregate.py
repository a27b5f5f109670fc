"""A failed run still yields a full report: every rank listed, the failure explained."""

from pathlib import Path

from ddplab.records.config import LaunchOptions
from ddplab.supervision.elastic import ElasticFailure
from ddplab.supervision.job import JobOutcome
from ddplab.measurements import train
from ddplab.platform import describe
from ddplab.job.policy import plan
from ddplab.records import Verdict
from ddplab.records.session import Timeseries
from ddplab.basics.rundir import RunDir
from ddplab.job.session_record import session_record
from tests.unit import fakes

NCCL_TEXT = ("torch.distributed.DistBackendError: NCCL error in: NCCLUtils.cpp:93, invalid usage, NCCL version "
             "2.28.9\nncclInvalidUsage: This usually reflects invalid usage of NCCL library.\nLast error:\n"
             "Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 60")


class _NoSamples:
    def peaks(self):
        return {}

    def timeseries(self):
        return Timeseries(enabled=True, interval_s=0.5, method="test", samples=[])


def test_forced_nccl_refusal_is_reported_as_expected_failure(tmp_path):
    platform = describe(fakes.nvidia(loaded="2.28.9"))
    placement = plan(LaunchOptions(nproc=2, backend="nccl"), platform)
    run = RunDir(Path(tmp_path), "rid")
    outcome = JobOutcome(run, 0.0, 9.0, ok=False, duration_s=9.0, torchrun_root_cause_rank=0,
                         failures={0: ElasticFailure(0, 111, 1, None, NCCL_TEXT, 1.0)})
    (tmp_path / "pids").mkdir()
    (tmp_path / "pids" / "1").write_text("112\n")
    record = train.record_of(session_record(placement, run, outcome, _NoSamples(), None, None, 1), [])
    ranks = record.session.ranks
    assert [r.rank for r in ranks] == [0, 1]
    assert [r.status for r in ranks] == ["failed", "stopped by launcher"]
    assert ranks[1].pid == 112 and ranks[1].device == "cuda:0"
    assert record.session.completed is False and record.params_identical is None
    assert record.session.expected_failure_observed is True
    assert [c.verdict for c in train.checks(record)] == [Verdict.FAIL]
    assert "failed as expected" in train.summary(record)
