"""The report's latency storm (10,000 x 4-byte all_reduce), measured properly.

Mean latency as the report defines it (wall time of N calls / N) but synchronised, the unsynchronised number beside
it, the per-op distribution from a separate blocking pass, device time from events (dispatch overhead shows), each
rank's CPU time and context switches, and device utilisation. Judged against a threshold per setup (THRESHOLDS).
With ``--engine library`` or ``both``, the numbers are the engine's own; with both, torch's are judged as always and
the library's stand beside them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from typing import TYPE_CHECKING

from .checks import machines_alike, run_checks
from ..basics.cli_options import Range, argv_of, check_fields, nested, option, switch
from ..records.config import LaunchOptions
from ..records.placement import Placement
from ..records import Check, Verdict, library_engine
from ..records.library_engine import LIBRARY, AddedCost, added_cost
from ..records.machines import INTRA
from ..records.session import Distribution, Histogram
from ..records.storm import StormRankResult, StormRecord, StormSettings, StormSummary

if TYPE_CHECKING:
    from ..basics.observer import Observer
    from ..records.machines import StormMachines
    from ..records.memory import MemoryNeed

NAME = "storm"
SUMMARY = "latency storm: N tiny all_reduces, mean/p50/p99 latency, CPU cost, device time"
MAX_ITERS = 10_000_000
MAX_BYTES = 1 << 30
MAX_THRESHOLD_US = 60e6  # a minute per 4-byte all_reduce is no threshold at all


@dataclass(frozen=True, kw_only=True)
class StormConfig:
    """The report's latency storm: N tiny all_reduces."""

    launch: LaunchOptions = nested(LaunchOptions, json={"flatten": True})
    iters: int = option("--iters", default=10_000, range=Range(1, MAX_ITERS))
    """How many all_reduces the storm runs."""
    bytes: int = option("--bytes", default=4, range=Range(1, MAX_BYTES))
    """Bytes per all_reduce."""
    warmup: int = field(init=False, default=0)
    """Untimed all_reduces first: min(100, iters)."""
    per_op_iters: int = field(init=False, default=0)
    """Ops in the blocking per-op pass: min(iters, 2000)."""
    threshold_us: float | None = option("--threshold-us", default=None, range=Range(
        0, MAX_THRESHOLD_US, name="us", low_open=True, reference="invalid-threshold"))
    """Fail above this mean latency in microseconds; default: chosen per setup (printed with the result)."""
    sample: bool = switch(off="--no-sample", default=True)
    """Sample each rank's memory and CPU time while the storm runs (on by default); --no-sample: measure without
    sampling, to see what the sampler itself costs."""
    engine: str = library_engine.engine_option()
    """torch: through torch.distributed (the report's method); library: the collective library called directly
    through the vendor's binding on the same buffers (`ddplab env` says whether it is installed, and how to install
    it); both: side by side, with what torch adds per call."""

    def __post_init__(self):
        check_fields(self)
        object.__setattr__(self, "warmup", min(100, self.iters))
        object.__setattr__(self, "per_op_iters", min(self.iters, 2000))

    to_argv = argv_of  # the command line that gives this config back


Config, Record = StormConfig, StormRecord

METHOD = ("mean: pipelined (N back-to-back all_reduces, one device sync, wall/N), averaged over ranks; "
          "per-op: blocking (device sync after each op, host perf_counter); device: event pairs per op")
# The report's 0.1 ms line is for device loopback. Other setups get a line that a healthy stack meets, with
# the measurement it comes from (docs/background.md §2, §5).
THRESHOLDS = {
    "device": (100.0, "the report's warning line for device loopback (0.1 ms); measured 31 us on 2x H200 NCCL"),
    "gloo-on-device": (1000.0, "gloo stages device tensors through host memory; measured 371 us on H200"),
    "host": (1000.0, "gloo over loopback TCP on the host CPU; measured 164-300 us on an idle 2-core machine, 96 us on "
                     "16 cores; a busy host can double that"),
}


def run(config: StormConfig, observer: Observer | None = None) -> StormRecord:
    from ..job.session import QUIET, prepare, run_workload, Workload
    from ..platform import memory_plan
    from ..platform.library_engine import prepare_library

    prepared = prepare(config.launch, with_memory=True)
    memory_plan.require_fits(*prepared, memory_need(config, prepared[1]), f"--bytes {config.bytes}", "storm-too-large",
                             hint="lower --bytes")
    library = prepare_library(config.engine, *prepared)
    settings = StormSettings(iters=config.iters, bytes=config.bytes, warmup=config.warmup,
                             per_op_iters=config.per_op_iters, engine=config.engine,
                             shared_device=prepared[1].shared_device)
    session = run_workload(Workload("storm", settings), config.launch, "storm", observer or QUIET, sample=config.sample,
                           prepared=prepared)
    return summarise_storm(session.record, session.placement, session.results, config, library)


def memory_need(config: StormConfig, placement: Placement) -> MemoryNeed:
    """One float32 buffer of --bytes per rank, all_reduced one call at a time (platform/memory_plan.py), through the
    backend the placement chose (gloo stages a device buffer through pinned host memory)."""
    from ..collectives.common import one_buffer
    from ..platform import memory_plan

    count = max(1, config.bytes // 4)
    route = memory_plan.Route.of(placement.backend if config.engine != LIBRARY else LIBRARY, placement.host_only)
    return memory_plan.collective_need("all_reduce", one_buffer(count, placement.nproc, True), 4, route,
                                       check_data=False)


def summarise_storm(session, placement: Placement, results: list[StormRankResult], config: StormConfig,
                    library=None) -> StormRecord:
    """The storm as reported, from each finished rank's result (none when the ranks did not finish)."""
    from .aggregate import storm_machines

    threshold, why = threshold_for(placement, config.threshold_us, config.engine)
    ran = dict(engine=config.engine, library=library)
    if not results:
        return StormRecord(session=session, correct=False, threshold_us=threshold, threshold_reason=why,
                           within_threshold=False, **ran)
    summary = summarise(results, session.timeseries)
    record = StormRecord(session=session, correct=all(r.correct for r in results), threshold_us=threshold,
                         threshold_reason=why, within_threshold=summary.mean_us <= threshold, summary=summary,
                         machines=storm_machines(results, config.bytes), **ran)
    if config.engine != library_engine.BOTH:
        return record
    theirs = [r.library for r in results]
    library_summary = summarise(theirs, session.timeseries)
    return replace(record, library_summary=library_summary, library_correct=all(r.correct for r in theirs),
                   added_cost=storm_costs(config.bytes, summary, library_summary))


def storm_costs(size: int, torch: StormSummary, library: StormSummary) -> list[AddedCost]:
    """What torch adds per call: in the pipelined mean (the storm's number) and in the blocking per-op median."""
    return [added_cost("all_reduce", size, True, "pipelined mean", torch.mean_us, library.mean_us),
            added_cost("all_reduce", size, True, "blocking per-op p50", torch.per_op_us.p50, library.per_op_us.p50)]


def threshold_for(placement: Placement, override: float | None, engine: str) -> tuple[float, str]:
    if override is not None:
        return override, "set with --threshold-us"
    if placement.host_only:
        return THRESHOLDS["host"]
    if placement.backend == "gloo" and engine != library_engine.LIBRARY:  # the library engine never stages through gloo
        return THRESHOLDS["gloo-on-device"]
    return THRESHOLDS["device"]


def summarise(results: list[StormRankResult], timeseries) -> StormSummary:
    mean = sum(r.mean_us for r in results) / len(results)
    device = [r.device_us for r in results if r.device_us and r.device_us.n]
    device_p50 = max(d.p50 for d in device) if device else None
    util = [u for sample in timeseries.samples for u in sample.device_util_pct.values()]
    return StormSummary(
        method=METHOD,
        mean_us=mean,
        mean_us_max_rank=max(r.mean_us for r in results),
        seed_method_us=max(r.seed_method_us for r in results),
        per_op_us=Distribution.worst_of([r.per_op_us for r in results]),
        per_op_histogram=Histogram(results[0].per_op_histogram.edges_us,
                                   [sum(c) for c in zip(*(r.per_op_histogram.counts for r in results))]),
        device_us=Distribution.worst_of(device) if device else None,
        # Device-bound when each op's device time is most of the wall time per op; then the host is not the
        # bottleneck and the dispatch overhead is hidden (negative difference).
        mean_minus_device_us=(mean - device_p50) if device_p50 is not None else None,
        bound_by=None if device_p50 is None else ("device" if device_p50 >= 0.8 * mean else "host dispatch"),
        cpu_system_pct_of_wall=max(100 * r.cpu_system_s / r.storm_wall_s for r in results),
        cpu_user_pct_of_wall=max(100 * r.cpu_user_s / r.storm_wall_s for r in results),
        device_util_pct_max=max(util) if util else None,
    )


def checks(record: StormRecord) -> list[Check]:
    return run_checks(record.session, NAME, lambda: own_checks(record))


def own_checks(record: StormRecord) -> list[Check]:
    s, ok = record.summary, record.within_threshold
    return [
        Check("mean all_reduce latency", Verdict.PASS if ok else Verdict.FAIL,
              f"{s.mean_us:.1f} us (p99 {s.per_op_us.p99:.0f} us)", f"<= {record.threshold_us:.0f} us",
              record.threshold_reason,
              "none" if ok else "too slow for this setup: check the sharing daemon (MPS), the backend choice, "
                                "and the driver's launch overhead"),
        Check("all_reduce result correct", Verdict.PASS if record.correct else Verdict.FAIL, str(record.correct),
              "true", "a final all_reduce of known values summed right on every rank",
              "none" if record.correct else "the backend returns wrong sums: report it with this JSON"),
        *library_checks(record), *storm_checks(record.machines, record.session.host_only)]


def storm_checks(machines: StormMachines | None, host_only: bool) -> list[Check]:
    if machines is None or not machines.latency:
        return []
    rows = [Check("latency inside and between machines", Verdict.INFO,
                  "; ".join(f"{g.group.label} {g.mean_us:.1f} us" for g in machines.latency), "informational",
                  machines.method, "none")]
    inside = {g.group.machines[0]: g.mean_us for g in machines.latency if g.group.scope == INTRA}
    if len(inside) >= 2:
        rows.append(machines_alike("latency inside each machine", inside, "us", True, host_only))
    return rows


def library_checks(record: StormRecord) -> list[Check]:
    """The library engine: which library it called, its own latency, its correctness and what torch adds."""
    if record.library is None:
        return []
    rows = library_engine.library_checks(record.library)
    s = record.library_summary
    if s is not None:
        rows.append(Check("library engine mean latency", Verdict.INFO, f"{s.mean_us:.1f} us (p99 {s.per_op_us.p99:.0f} "
                          f"us)", "informational", "the same storm through the collective library alone, right "
                                                  "after torch's passes on the same buffer", "none"))
    if record.library_correct is not None:
        ok = record.library_correct
        rows.append(Check("library engine result correct", Verdict.PASS if ok else Verdict.FAIL, str(ok), "true",
                          "a final all_reduce of known values, through the library, summed right on every rank",
                          "none" if ok else "the library returns wrong sums: report it with this JSON"))
    return rows + library_engine.added_cost_check(record.added_cost or [])


def summary(record: StormRecord) -> str:
    session = record.session
    if not session.completed:
        return f"{session.backend}: {session.failure_reason()}"
    side = "<=" if record.within_threshold else ">"
    text = f"{library_engine.label(record)}: mean {record.summary.mean_us:.1f} us {side} {record.threshold_us:.0f} us"
    if record.library_summary is not None:
        text += f"; library engine {record.library_summary.mean_us:.1f} us, torch adds " \
                f"{record.summary.mean_us - record.library_summary.mean_us:+.1f} us per call"
    return text
