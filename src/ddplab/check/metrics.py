"""What a check reads from the lab's stages: the node's machine type and the numbers (records.Metrics).

Read from the stages' records whichever way they came (a run just now, a report read back from JSON), so a
report judged again (--from-report) or held up as a baseline gives the same numbers.
"""

from __future__ import annotations

from ..measurements import LEFTOVERS
from ..records.run import StageRecord
from .record import Busbw, Latency, MachineType, Metrics


def machine_type(platform) -> MachineType | None:
    """Device model x count x collective library and the version loaded (None: no platform was read)."""
    if platform is None:
        return None
    device = platform.devices[0].name if platform.devices else platform.device_type
    library = platform.collective_library or platform.backend
    if platform.collective_loaded_version:
        library = f"{library} {platform.collective_loaded_version}"
    return MachineType(device=device, count=platform.device_count, library=library)


def stage_of(stages: list[StageRecord], command: str) -> StageRecord | None:
    """The stage that ran ``command``: the one named for it (a lab report has "sweep" beside "sweep-shared"),
    else the first."""
    ran = [s for s in stages if s.report is not None and s.report.command == command]
    return next((s for s in ran if s.name == command), ran[0] if ran else None)


def metrics_of(stages: list[StageRecord]) -> Metrics:
    sweep, storm, ceiling, env = (stage_of(stages, c) for c in ("sweep", "storm", "ceiling", "env"))
    busbw, wrong = [], None
    if sweep is not None and sweep.report.results.session.completed:
        r = sweep.report.results
        busbw = [Busbw(row.op, row.size_bytes, bool(row.in_place), row.busbw_gbps, row.time_us) for row in r.rows
                 if row.busbw_gbps is not None and row.size_bytes and row.time_us is not None]
        wrong = r.num_wrong_total
    latency = None
    if storm is not None and storm.report.results.summary is not None:
        s = storm.report.results.summary
        d = s.per_op_us
        latency = Latency("all_reduce", storm.report.config.bytes, s.mean_us, d.p50, d.p90, d.p99, d.max)
    copy = None
    if ceiling is not None and ceiling.report.results.device_copy is not None:
        copy = ceiling.report.results.device_copy.gbps
    return Metrics(busbw=busbw, latency=latency, copy_ceiling_gbps=copy, wrong_elements=wrong,
                   leftover_processes=leftovers(stages, env))


def leftovers(stages: list[StageRecord], env: StageRecord | None) -> int | None:
    """Orphaned ranks the environment survey found, and what this run's own stages left running."""
    found = len(env.report.results.survey.orphans) if env is not None else None
    own = next((s for s in stages if s.name == LEFTOVERS), None)
    if own is not None:
        found = (found or 0) + len(own.left_pids or []) + len(own.orphans or [])
    return found
