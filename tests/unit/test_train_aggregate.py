"""A failed run still yields a full report: every rank listed, the failure explained."""

from pathlib import Path

from ddplab.commands.train import aggregate, summary_line, train_verdict
from ddplab.config import LaunchOptions
from ddplab.launch import LaunchResult, RankFailure, RunDir
from ddplab.platform import describe
from ddplab.policy import plan
from ddplab.session import Session
from tests.unit import fakes

NCCL_TEXT = ("torch.distributed.DistBackendError: NCCL error in: NCCLUtils.cpp:93, invalid usage, NCCL version "
             "2.28.9\nncclInvalidUsage: This usually reflects invalid usage of NCCL library.\nLast error:\n"
             "Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 60")


class _NoSamples:
    def peaks(self):
        return {}

    def timeseries(self):
        return {"interval_s": 0.5, "method": "test", "samples": []}


def test_forced_nccl_refusal_is_reported_as_expected_failure(tmp_path):
    platform = describe(fakes.nvidia(loaded="2.28.9"))
    placement = plan(LaunchOptions(nproc=2, backend="nccl"), platform)
    outcome = LaunchResult("rid", str(tmp_path), ok=False, duration_s=9.0, torchrun_root_cause_rank=0,
                           failures={0: RankFailure(0, 0, 111, 1, None, NCCL_TEXT, 1.0)})
    run = RunDir(Path(tmp_path), "rid")
    (tmp_path / "pids").mkdir()
    (tmp_path / "pids" / "1").write_text("112\n")
    results = aggregate(Session(platform, placement, run, outcome, _NoSamples()))
    assert [r["rank"] for r in results["ranks"]] == [0, 1]
    assert [r["status"] for r in results["ranks"]] == ["failed", "stopped by launcher"]
    assert results["ranks"][1]["pid"] == 112 and results["ranks"][1]["device"] == "cuda:0"
    assert results["completed"] is False and results["params_identical"] is None
    assert results["expected_failure_observed"] is True
    assert train_verdict(results) == "fail"
    assert "failed as expected" in summary_line(results)
