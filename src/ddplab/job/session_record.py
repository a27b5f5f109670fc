"""The ``SessionRecord`` every multi-rank measurement carries, from the job's outcome, the placement and the
sampler: one entry per rank this launcher started, finished or not.
"""

from __future__ import annotations

from ..records.codec import to_json
from ..records.placement import Placement
from ..records.session import FailureRecord, RankOutcome, SessionRecord
from ..basics.rundir import RunDir
from ..supervision.sampler import RankSampler
from ..supervision.elastic import ElasticFailure
from ..supervision.job import JobOutcome
from ..supervision.states import read_states


def torchrun_job_ranks(placement: Placement, outcome: JobOutcome) -> list[RankOutcome]:
    """Every rank of a torchrun job that this rank heard from (all of them when the job completed)."""
    if not outcome.return_values:
        return [RankOutcome(rank=r, local_rank=f.local_rank, pid=f.pid, device=None, peak_mem_bytes=None,
                            status="failed", failure=_failure_record(f))
                for r, f in outcome.failures.items()]
    return [RankOutcome(rank=v.rank, local_rank=v.local_rank, pid=v.pid, device=v.device,
                        peak_mem_bytes=getattr(v.result, "peak_mem_bytes", None), status="finished",
                        world_size=v.world_size, hostname=v.hostname, backend=v.backend,
                        memory_cap_applied=v.memory_cap_applied, result=v.result)
            for v in (outcome.return_values[r] for r in sorted(outcome.return_values))]


def session_record(placement: Placement, run: RunDir, outcome: JobOutcome, sampler: RankSampler, daemon: dict | None,
            hang, nnodes: int) -> SessionRecord:
    return SessionRecord(
        backend=placement.backend,
        backend_reason=placement.backend_reason,
        shared_device=placement.shared_device,
        placement=to_json(placement),
        warnings=list(placement.warnings),
        sharing_daemon=daemon,
        run_id=outcome.run_id,
        run_dir=outcome.run_dir,
        world_size=next((v.world_size for v in outcome.return_values.values()), placement.nproc * nnodes),
        nnodes=nnodes,
        # a script's ranks return nothing through elastic: every one ended with exit 0
        completed=outcome.ok and (bool(outcome.return_values) or bool(outcome.ends)
                                  and all(e.ok for e in outcome.ends.values())),
        ranks=_rank_outcomes(placement, run, outcome, sampler),
        torchrun_root_cause_rank=outcome.torchrun_root_cause_rank,
        launcher_error=outcome.launcher_error,
        listen=outcome.listen,
        interrupted=outcome.interrupted,
        hang=hang,
        expected_failure=placement.expected_failure,
        expected_failure_observed=_refusal_seen(placement, outcome),
        duration_s=round(outcome.duration_s, 3),
        timeseries=sampler.timeseries(),
    )


def _refusal_seen(placement: Placement, outcome: JobOutcome) -> bool | None:
    """Did the library refuse with the words the policy predicted (forced backend)?"""
    refusal = placement.expected_failure
    if not refusal or outcome.ok:
        return None
    quoted = refusal.split('"')[1] if '"' in refusal else refusal
    text = " ".join(f.message + f.log_tail for f in outcome.failures.values())
    return quoted.lower() in text.lower()


def _node_base(outcome: JobOutcome, states: dict) -> int:
    """The global rank of this machine's local rank 0: from a rank that reported, else 0 (one machine)."""
    for value in outcome.return_values.values():
        return value.rank - value.local_rank
    for rank, failure in outcome.failures.items():
        return rank - failure.local_rank
    return next(iter(states.values())).node_base if states else 0


def _failure_record(failure: ElasticFailure) -> FailureRecord:
    return FailureRecord(failure.exitcode, failure.signal, failure.message[-1500:], failure.log_tail)


def _rank_outcomes(placement: Placement, run: RunDir, outcome: JobOutcome,
                   sampler: RankSampler) -> list[RankOutcome]:
    """One entry per rank this launcher started, finished or not: identity, status, sampler peaks, result."""
    peaks = sampler.peaks()
    pids = run.rank_pids()
    states = read_states(run)  # where each rank ran, for the ranks that did not return
    base = _node_base(outcome, states)
    entries = []
    for local in range(placement.nproc):
        rank = placement.global_rank(local, base)
        value = outcome.return_values.get(rank)
        failure = outcome.failures.get(rank)
        state = states.get(rank)
        pid = value.pid if value else (failure.pid if failure else pids.get(rank))
        end = outcome.ends.get(rank)
        entries.append(RankOutcome(
            rank=rank, local_rank=local, pid=pid, device=placement.device_label(local),
            peak_mem_bytes=getattr(value.result, "peak_mem_bytes", None) if value else None,
            status="finished" if value or (end is not None and end.ok) else ("failed" if failure
                                                                                else "stopped by launcher"),
            peaks=peaks.get(rank),
            world_size=value.world_size if value else None,
            hostname=value.hostname if value else (state.host if state else None),
            address=state.address if state else None,
            backend=value.backend if value else None,
            memory_cap_applied=value.memory_cap_applied if value else None,
            failure=_failure_record(failure) if failure else None,
            result=value.result if value else None,
        ))
    return entries
