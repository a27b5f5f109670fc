"""Sweep records made by hand: a completed two-rank session around the rows a test gives."""

from __future__ import annotations

from ddplab.measurements import spikes as spike_rule
from ddplab.records.session import SessionRecord, Timeseries
from ddplab.records.sweep import SweepRecord, SweepRow

_FOUND = object()  # spikes found in the rows, as the measurement finds them


def session_record(host_only: bool = False, completed: bool = True, warnings=(), world_size: int = 2) -> SessionRecord:
    return SessionRecord(
        backend="gloo", backend_reason="test", shared_device=True, placement={"host_only": host_only},
        warnings=list(warnings), sharing_daemon=None, run_id="sweep-test", run_dir="/nonexistent", world_size=world_size,
        nnodes=1, completed=completed, ranks=[], torchrun_root_cause_rank=None,
        launcher_error=None if completed else "a rank failed", listen=None, interrupted=False, hang=None,
        expected_failure=None, expected_failure_observed=None, duration_s=1.0,
        timeseries=Timeseries(enabled=False, interval_s=0.5, method="off"))


def sweep_record(rows: list[SweepRow], spikes=_FOUND, repeat: int = 1, host_only: bool = False,
                 min_busbw: float | None = None, completed: bool = True, warnings=(), world_size: int = 2
                 ) -> SweepRecord:
    busbw = [r.busbw_gbps for r in rows if r.busbw_gbps is not None]
    return SweepRecord(
        session=session_record(host_only, completed, warnings, world_size), mode="pipelined", dtype="float",
        rows=rows, num_wrong_total=sum(r.num_wrong or 0 for r in rows), errors=[r for r in rows if r.error],
        avg_busbw_gbps=sum(busbw) / len(busbw) if busbw else None, min_busbw_gbps=min_busbw, ceiling=None,
        time_method="pipelined", repeat=repeat,
        spikes=spike_rule.find_spikes(rows) if spikes is _FOUND else spikes,
        spike_rule=spike_rule.RULE)
