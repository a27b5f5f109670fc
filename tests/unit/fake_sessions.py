"""Hand-made SessionRecords and rank results: a measurement's record and checks, judged without processes."""

from __future__ import annotations

from ddplab.records.session import RankOutcome, RankSample, Sample, SessionRecord, Timeseries
from ddplab.records.train import TrainRankResult


def session_record(completed: bool = True, world_size: int = 2, warnings: tuple[str, ...] = (),
                   samples: tuple[Sample, ...] = (), sharing_daemon: dict | None = None) -> SessionRecord:
    ranks = [RankOutcome(rank=r, local_rank=r, pid=1000 + r, device="cpu", peak_mem_bytes=None,
                         status="finished" if completed else "failed") for r in range(world_size)]
    return SessionRecord(
        backend="gloo", backend_reason="test", shared_device=True, placement=None, warnings=list(warnings),
        sharing_daemon=sharing_daemon, run_id="rid", run_dir="/nowhere", world_size=world_size, nnodes=1,
        completed=completed, ranks=ranks, torchrun_root_cause_rank=None if completed else 0,
        launcher_error=None if completed else "rank 0 failed", listen=None, interrupted=False, hang=None,
        expected_failure=None, expected_failure_observed=None, duration_s=1.0,
        timeseries=Timeseries(enabled=True, interval_s=0.5, method="test", samples=list(samples)))


def sample(t_s: float, rss: dict[int, int], device: dict[int, int | None] | None = None) -> Sample:
    """One sampler reading: each rank's RSS and (optionally) device memory."""
    return Sample(t_s, [RankSample(rank=r, pid=1000 + r, cpu_user_s=0.0, cpu_system_s=0.0, ctx_switches=0,
                                   rss_bytes=b, device_mem_bytes=(device or {}).get(r)) for r, b in rss.items()])


def train_rank(rank: int = 0, digest: str = "ab" * 32, world: int = 2, grad_ok: bool = True,
               local_differs: bool | None = True, step_times: tuple[float, ...] = (100.0, 200.0)) -> TrainRankResult:
    return TrainRankResult(
        params_sha256=digest, all_params_sha256=[digest] * world, grad_matches_reference=grad_ok, grad_checks=2,
        grad_worst_step=0, grad_err_vs_concat_rel=1e-7, grad_err_vs_rank_average_rel=1e-7,
        device_numeric_noise_rel=0.0, grad_rtol=1e-4, local_grad_rel_gap=None if local_differs is None else 0.5,
        local_grad_differs=local_differs, final_loss=0.1, step_times_us=list(step_times),
        step_time_p50_us=step_times[0], peak_mem_bytes=1 << 20, peak_mem_method="test", num_params=110,
        float32_matmul_precision="highest")
