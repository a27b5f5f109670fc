"""nccl-tests from Python: the same sizes (-b/-e/-f), byte counts, bus factors (GB = 1e9) and columns, so the two
outputs can be put side by side; a correctness check at every size with exact data.

Each size is measured -R times; the row reports the median repetition, averaged over ranks (nccl-tests -a 1). A size
far off its neighbours is a spike (spikes.py): a WARN finding, never a silent number. The engine is torch, the
collective library alone (the same rows, so `compare` lines it up), or both, with what torch adds per call.
Memory: refused up front only when not even the smallest size fits (exit 2); the ranks plan every size and skip,
together, one they cannot hold (a SKIP row, never the OOM killer), freeing each size's cache before the next.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from . import aggregate
from .checks import HOST_NOTE, finding_verdict, rule_text, run_checks
from .. import collectives
from ..platform import memory_plan
from ..platform.library_engine import prepare_library, row_costs
from . import spikes
from ..basics.cli_options import Range, argv_of, check_fields, nested, option, spelt, switch
from ..collectives.common import DTYPES, torch_dtype
from ..records.config import LaunchOptions
from ..errors import invalid_choice
from ..basics.sizes import SizeRange, human_bytes
from ..basics.validators import require
from ..records.placement import Placement
from ..records import Check, Verdict, library_engine
from ..records.library_engine import LIBRARY, LibraryEngineRecord
from ..records.memory import MachineMemory, MemoryFit, MemoryNeed, MemoryShare
from ..records.session import SessionRecord, Timeseries
from ..records.sweep import CopyCeiling, SamplerRecord, SweepRankResult, SweepRankRow, SweepRecord, SweepRow, \
    SweepSettings
from ..basics.observer import QUIET, Observer
from .sweep_rows import merge_row, merge_rows

NAME = "sweep"
SUMMARY = "sweep collectives as nccl-tests does: algbw/busbw per size for each collective, with correctness checks"
REPEAT_ON_ACCELERATOR = 3  # one disturbed repetition cannot move the median of three
REPEAT_ON_HOST = 1  # the host runs gloo as a functional check; the lab asks for -R 3 (lab/profiles.py)
MAX_ITERS = 100_000
MAX_REPEAT = 100
MAX_BUSBW_GBPS = 1e6  # a petabyte per second: no interconnect is near it
DEFAULT_SIZES = tuple(8 << i for i in range(24))  # -b 8 -e 64M -f 2 (sizes.size_range)
MODES = ("pipelined", "blocking")  # nccl-tests' default, and its -z 1 (workloads/common.py)


def iters_option():
    """-n, as nccl-tests (the sweep's and pairwise's: a field object serves one class only)."""
    return option("-n", "--iters", default=20, range=Range(1, MAX_ITERS, reference="invalid-iters"))


def warmup_option():
    """-w, as nccl-tests."""
    return option("-w", "--warmup", default=5, range=Range(0, MAX_ITERS, reference="invalid-warmup"))


@dataclass(frozen=True, kw_only=True)
class SweepConfig:
    """nccl-tests from Python: every size of each collective, timed and checked."""

    launch: LaunchOptions = nested(LaunchOptions, json={"flatten": True})
    ops: tuple[str, ...] = option("--ops", default=("all_reduce",), parse=lambda text, flag: tuple(
        collectives.parse_ops(text)), listed=lambda: (*collectives.COLLECTIVES, "all"))
    """Collectives: a comma list of ddplab's names (kebab-case accepted), or all."""
    sizes: tuple[int, ...] = spelt(SizeRange(), default=DEFAULT_SIZES)
    """The largest buffer of each measurement in bytes, as nccl-tests' -b/-e/-f make them; the command line
    spells them back as -b/-e/-f (sizes.range_args), so they must be such a range."""
    dtype: str = option("--dtype", default="float", choices=DTYPES)
    """Element type, by nccl-tests' names."""
    mode: str = option("--mode", default="pipelined", choices=MODES)
    """pipelined: nccl-tests' default, iterations back to back; blocking: nccl-tests -z 1, a sync after each."""
    iters: int = iters_option()
    """Timed iterations per size."""
    warmup: int = warmup_option()
    """Untimed iterations per size."""
    check: bool = switch("--check", "--no-check", default=True)
    """Check the results at every size with exact data."""
    repeat: int | None = option("-R", "--repeat", default=None, range=Range(1, MAX_REPEAT, reference="invalid-repeat"))
    """Times each size is measured, each -n iterations as nccl-tests; the row reports the median and the spread;
    default: 3 on an accelerator, 1 on the host CPU (chosen when it runs)."""
    min_busbw: float | None = option("--min-busbw", default=None,
                                     range=Range(0, MAX_BUSBW_GBPS, name="GB/s", low_open=True))
    """Fail when the average busbw (GB/s, nccl-tests' footer) is below this; default: no floor."""
    sample: bool = switch(off="--no-sample", default=True)
    """Sample each rank's memory and CPU time while the sweep runs (on by default); --no-sample: measure without
    sampling, to see what the sampler itself costs."""
    sample_while_timing: bool = switch("--sample-while-timing", default=False)
    """Let the sampler query the device inside timed windows too (by default it keeps out of them; the old
    behaviour, to test whether it causes spikes)."""
    engine: str = library_engine.engine_option()
    """torch: through torch.distributed (the report's method); library: the collective library called directly
    through the vendor's binding on the same buffers (`ddplab env` says whether it is installed, and how to install
    it); both: side by side, with what torch adds per call."""

    def __post_init__(self):
        require(bool(self.ops), "invalid-collective", "--ops names no collective; valid: all, or a comma list of "
                                                      + ", ".join(collectives.COLLECTIVES))
        for op in self.ops:
            if op not in collectives.COLLECTIVES:
                raise invalid_choice("collective", op, collectives.COLLECTIVES)
        check_fields(self)

    to_argv = argv_of  # the command line that gives this config back


Config, Record = SweepConfig, SweepRecord
CEILING_MAX_BYTES = 1 << 30
# Bytes a rank holds per size: inputs, outputs and the expected buffer of the check (pairwise.py's floor; the sweep
# plans each size with platform/memory_plan.py).
BUFFERS_PER_SIZE = 4
SAMPLER_METHOD = ("wall-clock windows: each rank's timed repetition (from its barrier to its last sync) against "
                  "each device query the sampler made (time.time() on both sides, one machine)")


def run(config: SweepConfig, observer: Observer = QUIET) -> SweepRecord:
    from ..job.session import prepare, run_workload, Workload

    prepared = prepare(config.launch, with_memory=True)
    smallest = min(config.sizes)
    memory_plan.require_fits(*prepared, smallest_need(config, prepared[1]), f"-b {smallest} B (the smallest size)",
                             "sweep-too-large", hint="lower -b/--minbytes and -e/--maxbytes, or -n in pipelined mode")
    library = prepare_library(config.engine, *prepared)
    settings = settings_for(config, prepared[1])
    session = run_workload(Workload("sweep", settings), config.launch, "sweep", observer, sample=config.sample,
                           prepared=prepared, sample_device_while_timing=config.sample_while_timing)
    return summarise(session.record, session.results, settings, config.min_busbw, session.device_queries,
                     host_only=session.placement.host_only, library=library)


def smallest_need(config: SweepConfig, placement: Placement) -> MemoryNeed:
    """What the least demanding collective needs per rank at the smallest size, as the ranks will plan it: if
    this cannot fit, no size can, and the sweep is refused before it starts."""
    torch_engine = config.engine != LIBRARY
    route = memory_plan.Route.of(placement.backend if torch_engine else "library", placement.host_only)
    needs = needs_at(config, min(config.sizes), placement.nproc * config.launch.nnodes, route)
    return min(needs, key=lambda need: need.host_bytes + need.device_bytes)


def needs_at(config: SweepConfig, size: int, world: int, route: memory_plan.Route) -> list[MemoryNeed]:
    """What each collective of ``config`` needs per rank at ``size``, in each placement, as the ranks plan it."""
    import torch

    elem = torch.tensor([], dtype=torch_dtype(config.dtype)).element_size()
    calls = config.iters if config.mode == "pipelined" else 1
    return [memory_plan.collective_need(spec.name, spec.buffers(spec.count_for(size, world, elem), world, in_place),
                                        elem, route, in_flight=calls)
            for spec in map(collectives.get, config.ops) for in_place in spec.placements]


@dataclass(frozen=True)
class HostBound:
    """A sweep's sizes on the host CPU, bounded by the memory plan before it runs (``host_sizes_that_fit``)."""

    sizes: tuple[int, ...]  # the sizes kept: every one up to the first that would not fit
    refused: int | None = None  # the first size that would not fit (None: every size fits)
    fit: MemoryFit | None = None  # its judgement: needed against available, in words


def host_sizes_that_fit(config: SweepConfig, memory: MachineMemory) -> HostBound:
    """On the host CPU: ``config``'s sizes up to the last whose most demanding collective this machine's ranks can
    hold in ``memory``, planned before the run so it can say its sizes up front (the ranks still plan each size)."""
    route = memory_plan.Route.of("gloo", host_only=True)
    ranks = config.launch.nproc
    kept: list[int] = []
    for size in sorted(config.sizes):
        need = max(needs_at(config, size, ranks * config.launch.nnodes, route), key=lambda n: n.host_bytes)
        fit = memory_plan.judge(need, memory, ranks, ranks, host_only=True)
        if not fit.fits:
            return HostBound(tuple(kept), size, fit)
        kept.append(size)
    return HostBound(tuple(kept))


def config_as_run(config: SweepConfig, record: SweepRecord) -> SweepConfig:
    """The config with the repetitions chosen for the device, so the report's command line repeats this run."""
    return replace(config, repeat=record.repeat) if config.repeat is None else config


def default_repeat(host_only: bool) -> int:
    return REPEAT_ON_HOST if host_only else REPEAT_ON_ACCELERATOR


def settings_for(config: SweepConfig, placement: Placement) -> SweepSettings:
    """What the ranks run: the config, with the repetitions and the copy ceiling chosen for this placement."""
    measures_ceiling = placement.shared_device and not placement.host_only
    return SweepSettings(ops=config.ops, sizes=config.sizes, dtype=config.dtype, mode=config.mode,
                         iters=config.iters, warmup=config.warmup, check=config.check,
                         repeat=config.repeat or default_repeat(placement.host_only),
                         ceiling_bytes=min(max(config.sizes), CEILING_MAX_BYTES) if measures_ceiling else None,
                         engine=config.engine, shared_device=placement.shared_device,
                         memory=MemoryShare.of(placement))


def summarise(session: SessionRecord, results: list[SweepRankResult], settings: SweepSettings,
              min_busbw: float | None, device_queries: list[tuple[float, float]], host_only: bool,
              library: LibraryEngineRecord | None = None) -> SweepRecord:
    """The sweep as reported, from each finished rank's rows (none when the ranks did not finish)."""
    ceiling = next((r.ceiling for r in results if r.ceiling), None)
    rows = engine_rows([r.rows for r in results], session.world_size, settings.dtype, device_queries, ceiling)
    timed = [r.busbw_gbps for r in rows if r.busbw_gbps is not None]
    record = SweepRecord(
        session=session,
        mode=settings.mode,
        time_method=time_method(settings),
        repeat=settings.repeat,
        dtype=settings.dtype,
        rows=rows,
        num_wrong_total=sum(r.num_wrong or 0 for r in rows),
        errors=[r for r in rows if r.error],
        avg_busbw_gbps=sum(timed) / len(timed) if timed else None,
        min_busbw_gbps=min_busbw,
        ceiling=ceiling,
        spikes=spikes.find_spikes(rows),
        spike_rule=rule_text(spikes.RULE, host_only),
        sampler=sampler_record(session.timeseries, rows, device_queries),
        engine=settings.engine,
        library=library,
        machines=aggregate.sweep_machines(results, lambda same, n: merge_row(same, n, settings.dtype)),
    )
    if settings.engine != library_engine.BOTH or not results:
        return record
    theirs = engine_rows([r.library_rows or [] for r in results], session.world_size, settings.dtype,
                         device_queries, ceiling)
    return replace(record, library_rows=theirs, added_cost=row_costs(rows, theirs, settings.mode))


def engine_rows(per_rank_rows: list[list[SweepRankRow]], n: int, dtype: str, device_queries,
                ceiling: CopyCeiling | None) -> list[SweepRow]:
    """One engine's rows over every rank, each busbw also as a fraction of the copy ceiling where one was measured."""
    rows = merge_rows(per_rank_rows, n, dtype, device_queries)
    if ceiling is None:
        return rows
    return [replace(row, busbw_fraction_of_ceiling=row.busbw_gbps / ceiling.gbps) if row.busbw_gbps is not None
            else row for row in rows]


def time_method(settings: SweepSettings) -> str:
    how = ("pipelined: iters back to back, one device sync, wall/iters" if settings.mode == "pipelined"
           else "blocking: device sync after each op, mean of per-op wall times")
    return f"{how}; averaged over ranks; median of {settings.repeat} repetition(s) per size"


def sampler_record(timeseries: Timeseries, rows: list[SweepRow], queries: list[tuple[float, float]]) -> SamplerRecord:
    repetitions = [q for r in rows for q in (r.repeat_sampler_queried or [])]
    return SamplerRecord(
        on=timeseries.enabled,
        device_queries_kept_out_of_timed_windows=timeseries.enabled
                                                 and timeseries.device_queries_kept_out_of_timed_windows,
        device_queries=len(queries),
        device_queries_skipped_while_timing=timeseries.device_queries_skipped_while_timing,
        repetitions=len(repetitions),
        repetitions_overlapped_by_a_device_query=sum(repetitions),
        device_query_windows=[(round(a, 6), round(b, 6)) for a, b in queries],
        method=SAMPLER_METHOD,
    )


# ---------------------------------------------------------------------------------------------- verdict

def checks(record: SweepRecord) -> list[Check]:
    return run_checks(record.session, NAME, lambda: own_checks(record), exact=measured_rss(record.rows))


def own_checks(record: SweepRecord) -> list[Check]:
    rows = [correctness_check(record), *memory_check(record), *peak_bandwidth_check(record), *floor_check(record)]
    if record.spikes is not None:  # reports written before spikes were looked for have no such row
        rows.append(spike_check(record))
    return [*rows, *library_checks(record), *aggregate.sweep_checks(record.machines, record.host_only)]


def _row_name(row: SweepRow) -> str:
    return f"{row.op} {human_bytes(row.size_bytes)} {'in' if row.in_place else 'out-of'}-place"


def memory_check(record: SweepRecord) -> list[Check]:
    """SKIP, not FAIL: a size this machine cannot hold was not measured, and nothing is wrong with the stack."""
    skipped = [r for r in record.rows if r.memory is not None]
    if not skipped:
        return []
    names = ", ".join(_row_name(r) for r in skipped)
    return [Check("sizes the memory could hold", Verdict.SKIP,
                  f"{len(skipped)} of {len(record.rows)} rows skipped ({names}); {_row_name(skipped[0])}: "
                  f"{skipped[0].skipped}", "every size fits",
                  "each size is planned before it is allocated (memory_plan.py): one this machine cannot hold is "
                  "skipped, never run into the OOM killer",
                  "a machine with more memory, a lower -e, or fewer calls in flight (-n, or --mode blocking)")]


def measured_rss(rows: list[SweepRow]) -> str | None:
    """The largest peak RSS, and the RSS at the sizes' starts (flat when every size was freed)."""
    measured = [r for r in rows if r.peak_rss_bytes is not None]
    if not measured:
        return None
    top = max(measured, key=lambda r: r.peak_rss_bytes)
    starts = [r.start_rss_bytes for r in measured if r.start_rss_bytes is not None]
    text = f"per size, measured in the ranks: largest {human_bytes(top.peak_rss_bytes)} ({_row_name(top)})"
    if starts:
        text += f", at a size's start {human_bytes(min(starts))} to {human_bytes(max(starts))}"
    return text


def library_checks(record: SweepRecord) -> list[Check]:
    """The library engine: which library it called, its correctness beside torch and what torch adds per call."""
    if record.library is None:
        return []
    rows = library_engine.library_checks(record.library)
    theirs = record.library_rows
    if theirs is not None:
        wrong, errors = sum(r.num_wrong or 0 for r in theirs), [r for r in theirs if r.error]
        ok = not wrong and not errors
        rows.append(Check("library engine results correct", Verdict.PASS if ok else Verdict.FAIL,
                          f"#wrong {wrong}, errors {len(errors)}", "0",
                          "every size of every collective, through the library alone, gave exact data",
                          "none" if ok else "data corruption or a failed call through the library: report the "
                                            "library rows with #wrong > 0 or an error"))
    return rows + library_engine.added_cost_check(record.added_cost or [])


def correctness_check(record: SweepRecord) -> Check:
    wrong, errors = record.num_wrong_total, record.errors
    return Check("collective results correct", Verdict.PASS if not wrong and not errors else Verdict.FAIL,
                 f"#wrong {wrong}, errors {len(errors)}", "0", "every size of every collective gave exact data",
                 "none" if not wrong else "data corruption: report the rows with #wrong > 0")


def peak_bandwidth_check(record: SweepRecord) -> list[Check]:
    timed = record.bandwidth_rows
    if not timed:
        return []
    best = max(timed, key=lambda x: x.busbw_gbps)
    text = f"{best.busbw_gbps:.1f} GB/s ({best.op}, {best.size_bytes} B)"
    if record.ceiling:
        text += f" = {100 * best.busbw_gbps / record.ceiling.gbps:.2f}% of the copy ceiling"
    return [Check("peak bus bandwidth", Verdict.INFO, text, "informational (--min-busbw to gate)",
                  "nccl-tests' busbw definition, GB = 1e9", "compare with nccl-tests: `ddplab compare`")]


def floor_check(record: SweepRecord) -> list[Check]:
    """--min-busbw against nccl-tests' footer (the average busbw); only when a floor was asked for."""
    floor, avg = record.min_busbw_gbps, record.avg_busbw_gbps
    if floor is None:
        return []
    threshold = f">= {floor:g} GB/s (--min-busbw)"
    meaning = "nccl-tests' footer: the average busbw over every timed row, GB = 1e9"
    if avg is None:  # one rank: busbw is not defined, the floor cannot be judged
        return [Check("average bus bandwidth", Verdict.WARN, "n/a (world size 1: busbw is not defined)", threshold,
                      meaning, "run with 2 or more ranks to judge the floor")]
    ok = avg >= floor
    return [Check("average bus bandwidth", Verdict.PASS if ok else Verdict.FAIL, f"{avg:.2f} GB/s", threshold,
                  meaning, "none" if ok else "below the floor: compare with nccl-tests on this machine "
                                               "(`ddplab compare`) to tell the stack from the framework")]


def spike_check(record: SweepRecord) -> Check:
    found = record.spikes or []
    value = "; ".join(f"{x.op} {x.size_bytes} B {'in' if x.in_place else 'out'}-place {x.time_us:.1f} us = "
                      f"{x.factor:.1f}x its neighbours" for x in found) or "none"
    return Check("no size far off its neighbours", finding_verdict(found, record.host_only), value, record.spike_rule,
                 f"{spikes.FINDING}; each size is the median of {record.repeat} repetition(s)",
                 "none" if not found else "measure again with more repetitions (-R) and look at the spread in the "
                                          "JSON; `--no-sample` or `--sample-while-timing` tell whether the launcher's "
                                          "sampler is the cause")


def summary(record: SweepRecord) -> str:
    session = record.session
    if not session.completed:
        return f"{session.backend}: {session.failure_reason()}"
    avg = f"{record.avg_busbw_gbps:.2f} GB/s" if record.avg_busbw_gbps is not None else "n/a"
    text = f"{library_engine.label(record)}: {len(record.rows)} rows, #wrong {record.num_wrong_total}, avg busbw {avg}"
    skipped = sum(1 for r in record.rows if r.memory is not None)
    if skipped:
        text += f", {skipped} size(s) skipped: too little memory (needed vs available in the SKIP row)"
    if record.spikes:
        text += f", {len(record.spikes)} spike(s): {spikes.FINDING}"
        if record.host_only:
            text += f" ({HOST_NOTE.split(':')[0]})"
    if record.min_busbw_gbps is not None:
        text += f" (floor {record.min_busbw_gbps} GB/s)"
    if record.added_cost:
        worst = max(record.added_cost, key=lambda r: r.share)
        text += (f"; library engine alongside: torch adds up to {100 * worst.share:.0f} % per call "
                 f"({worst.op} {worst.size_bytes} B: {worst.added_us:+.1f} us)")
    return text
