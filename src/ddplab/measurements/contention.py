"""The time-slicing tax of the report's section 3.2: K processes computing on one device vs one alone.

K processes run the same matmul (bf16 on accelerators, fp32 on the host) for a fixed window, after one ran it alone.
Reported: aggregate efficiency (sum of the K rates / the ideal aggregate) and each process's slowdown. The ideal
depends on what the K processes share:
  device  one accelerator: time slicing can at best keep it as busy as one process did: the solo rate.
  cores   the host CPU: K processes of T threads on C usable cores: min(K x T, C) / min(T, C) x the solo rate.
On the host the number is informational (shared cores). `--mps` runs the same with a private MPS daemon.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .checks import run_checks
from ..platform import memory_plan
from ..basics.cli_options import Range, argv_of, check_fields, nested, option
from ..records.config import LaunchOptions
from ..errors import UsageError
from ..records.placement import Placement
from ..records import Check, Verdict
from ..records.memory import MemoryNeed
from ..basics.sizes import human_bytes
from ..records.contention import (ContentionRankResult, ContentionRecord, ContentionSettings, ContentionSummary,
                                  Efficiency)
from ..basics.observer import QUIET, Observer

NAME = "contention"
SUMMARY = "K processes computing on one device vs one alone: efficiency and per-process slowdown"
MIN_SIZE, MAX_SIZE = 16, 65536
MIN_SECONDS, MAX_SECONDS = 0.1, 600.0


@dataclass(frozen=True, kw_only=True)
class ContentionConfig:
    """K processes computing on one device vs one alone. The sharing daemon is off unless asked for (--mps): time
    slicing is what contention measures."""

    launch: LaunchOptions = nested(LaunchOptions, json={"flatten": True}, help={
        "placement": "Where the processes run. shared: all on device 0 (always so: per-device is refused); "
                     "per-device: refused, contention measures processes sharing one device; spread: as shared; "
                     "auto: shared.",
        "sharing_daemon": "The device-sharing daemon (MPS). on: the processes share the device through it; off: "
                          "they time-slice it, which is what contention measures; auto: off, unlike other commands."})
    size: int | None = option("--size", default=None, range=Range(MIN_SIZE, MAX_SIZE))
    """Matrix dimension; default: 8192 on an accelerator, 512 on the host (chosen once the device is known)."""
    seconds: float = option("--seconds", default=3.0, range=Range(MIN_SECONDS, MAX_SECONDS))
    """Measurement window of each phase, in seconds."""
    batch: int | None = field(init=False, default=None)
    """Matmuls between device synchronisations: 20 on an accelerator, 4 on the host, chosen with the
    device like ``size``; kept in the JSON config, where older reports wrote the chosen value."""

    def __post_init__(self):
        if self.launch.placement == "per-device":
            raise UsageError("contention-needs-shared-device",
                             "contention measures processes sharing one device; --per-device does not apply")
        daemon = "off" if self.launch.sharing_daemon == "auto" else self.launch.sharing_daemon
        object.__setattr__(self, "launch", replace(self.launch, placement="shared", sharing_daemon=daemon))
        check_fields(self)

    to_argv = argv_of  # the command line that gives this config back


Config, Record = ContentionConfig, ContentionRecord

EFFICIENCY_WARN = 0.80  # below this aggregate efficiency, time slicing costs more than it should
METHOD = ("fixed window per phase; device synchronised every batch; TFLOP/s = 2 n^3 x matmuls / time; "
          "efficiency = aggregate / ideal aggregate, ")
# (matrix dimension, matmuls between device syncs) when --size is not given: a kernel that keeps an
# accelerator busy, and one the host finishes a few of per second.
DEVICE_KERNEL, HOST_KERNEL = (8192, 20), (512, 4)


def run(config: ContentionConfig, observer: Observer = QUIET) -> ContentionRecord:
    from ..job.session import prepare, run_workload, Workload

    platform, placement = prepare(config.launch, with_memory=True)
    settings = settings_for(config, placement)
    memory_plan.require_fits(platform, placement, memory_need(settings, placement.host_only),
                             f"--size {settings.size} (3 matrices per process)", "contention-too-large",
                             hint="lower --size")
    session = run_workload(Workload("contention", settings), config.launch, "contention", observer,
                           prepared=(platform, placement))
    results: list[ContentionRankResult] = session.results
    if not results:
        return ContentionRecord(session=session.record)
    return ContentionRecord(session=session.record, summary=summarise(results, settings, placement.host_only))


def memory_need(settings: ContentionSettings, host_only: bool) -> MemoryNeed:
    """Two operands and a result per process, float32 on the host and bfloat16 on a device."""
    three = 3 * settings.size ** 2 * (4 if host_only else 2)
    method = f"per rank: 3 matrices of {settings.size} x {settings.size}, {human_bytes(three)}"
    need = memory_plan.with_margin(three)
    return MemoryNeed(need if host_only else 0, 0 if host_only else need, method)


def settings_for(config: ContentionConfig, placement: Placement) -> ContentionSettings:
    """The kernel for the device the ranks landed on: --size if given, and the batch that suits the device."""
    size, batch = HOST_KERNEL if placement.host_only else DEVICE_KERNEL
    return ContentionSettings(size=config.size or size, seconds=config.seconds, batch=batch)


def summarise(results: list[ContentionRankResult], settings: ContentionSettings, host: bool) -> ContentionSummary:
    solo = next(r.solo for r in results if r.solo is not None)
    rates = [r.together.tflops for r in results]
    first = results[0]
    efficiency = against_ideal(solo.tflops, rates, host, first.threads, first.usable_cores)
    return ContentionSummary(method=METHOD + efficiency.efficiency_method, matrix=first.matrix, dtype=first.dtype,
                             seconds=settings.seconds, solo_tflops=solo.tflops, together_tflops=rates,
                             against_ideal=efficiency)


def ideal_factor(host: bool, nproc: int, threads: int, cores: int | None) -> float | None:
    """How many times one process's rate the K processes could reach together (None: unknown)."""
    if not host:
        return 1.0
    if not cores:
        return None
    return min(nproc * threads, cores) / min(threads, cores)


def against_ideal(solo_tflops: float, together_tflops: list[float], host: bool, threads: int,
                  cores: int | None) -> Efficiency:
    """Efficiency against the ideal aggregate, with the basis it was judged on."""
    k = len(together_tflops)
    factor = ideal_factor(host, k, threads, cores)
    aggregate = sum(together_tflops)
    if host:
        method = (f"ideal aggregate on the host CPU = min(K x threads, usable cores) / min(threads, usable cores) "
                  f"x the solo rate = min({k} x {threads}, {cores}) / min({threads}, {cores}) x solo")
    else:
        method = "ideal aggregate on one device = the solo rate (time slicing shares one device)"
    return Efficiency(
        ideal_basis="cores" if host else "device",
        usable_cores=cores,
        threads_per_process=threads,
        ideal_factor=factor,
        ideal_aggregate_tflops=None if factor is None else factor * solo_tflops,
        aggregate_tflops=aggregate,
        aggregate_over_solo=aggregate / solo_tflops,
        efficiency=None if factor is None else aggregate / (factor * solo_tflops),
        efficiency_method=method,
        slowdown=[solo_tflops / r for r in together_tflops],
    )


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    threshold: str
    note: str  # what it means, or what to do


def judge(e: Efficiency) -> Judgement:
    """The one rule for contention's efficiency."""
    if e.efficiency is None:
        return Judgement(Verdict.WARN, "n/a", f"efficiency not computed: usable cores unknown on this host "
                                               f"(ideal_basis {e.ideal_basis})")
    if e.ideal_basis == "cores":
        return Judgement(Verdict.INFO, "informational on the host", "the host's cores are shared with everything "
                                                                    "else it runs; only an accelerator's time "
                                                                    "slicing is judged")
    threshold = f">= {100 * EFFICIENCY_WARN:.0f}%"
    if e.efficiency < EFFICIENCY_WARN:
        return Judgement(Verdict.WARN, threshold, "time slicing is expensive here: use the sharing daemon (--mps)")
    return Judgement(Verdict.PASS, threshold, "none")


def checks(record: ContentionRecord) -> list[Check]:
    return run_checks(record.session, NAME, lambda: [efficiency_check(record)])


def efficiency_check(record: ContentionRecord) -> Check:
    e = record.summary.against_ideal
    judged = judge(e)
    value = "n/a" if e.efficiency is None else f"{100 * e.efficiency:.1f}%"
    basis = f"the ideal aggregate of {e.usable_cores} usable cores" if e.ideal_basis == "cores" else \
        "one process alone"
    return Check("aggregate efficiency", judged.verdict, value, judged.threshold,
                 f"{record.session.world_size} processes computing together vs {basis}", judged.note)


def efficiency_text(record: ContentionRecord) -> str:
    e = record.summary.against_ideal
    if e.efficiency is None:
        return f"n/a ({judge(e).note})"
    if e.ideal_basis == "cores":
        return (f"{100 * e.efficiency:.1f}% of the ideal aggregate ({record.session.world_size} processes on "
                f"{e.usable_cores} usable cores = {e.ideal_factor:g}x one process alone; measured "
                f"{e.aggregate_over_solo:.2f}x)")
    return f"{100 * e.efficiency:.1f}% of one process alone"


def summary(record: ContentionRecord) -> str:
    if not record.session.completed:
        return record.session.failure_reason()
    threshold = judge(record.summary.against_ideal).threshold
    return f"{record.session.world_size} processes: {efficiency_text(record)} ({threshold})"
