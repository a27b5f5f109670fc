"""The loopback ceiling of the report's section 3.2: how fast this device copies memory.

One rank copies S bytes device-to-device (S/t, and memory traffic 2S/t) and host<->device through pinned memory.
"If loopback bandwidth is far below memory bandwidth, the copy path is broken": a shared-device sweep states its
busbw as a fraction of this. Informational; only a run that did not finish fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .checks import run_checks
from ..platform import memory_plan
from ..basics.cli_options import Range, argv_of, check_fields, option
from ..records.config import DEVICES, LaunchOptions
from ..basics.sizes import human, human_bytes, parse_size
from ..basics.validators import MAX_SIZE_BYTES
from ..records import Check, Verdict
from ..records.memory import MemoryNeed
from ..records.ceiling import CeilingRankResult, CeilingRecord, CeilingSettings
from ..basics.observer import QUIET, Observer

NAME = "ceiling"
SUMMARY = "device-to-device and host<->device copy bandwidth (the loopback ceiling)"
MAX_ITERS = 10_000
BYTES = Range(1, MAX_SIZE_BYTES, unit=" bytes")


@dataclass(frozen=True, kw_only=True)
class CeilingConfig:
    """The loopback ceiling: one rank on device 0 copies memory (the report's section 3.2)."""

    device: str = option("--device", default="auto", choices=DEVICES)
    """Device type, or auto for the detected accelerator (cpu when none)."""
    run_dir: str | None = option("--run-dir", default=None, metavar="DIR")
    """Directory for this run's logs and results; default: ./ddplab-runs/<run id>."""
    bytes: int = option("--bytes", default=1 << 30, range=BYTES, parse=parse_size, show=human)
    """Bytes per device copy, with K, M, G or T for powers of 1024."""
    host_bytes: int = option("--host-bytes", default=256 << 20, range=BYTES, parse=parse_size, show=human)
    """Bytes per host<->device copy."""
    iters: int = option("--iters", default=20, range=Range(1, MAX_ITERS))
    """Timed copies per path; the median is reported."""
    launch: LaunchOptions = field(init=False, default=None, metadata={"flatten": True})
    """Derived: always one rank on device 0 (its keys sit beside the others in the JSON config)."""

    def __post_init__(self):
        check_fields(self)
        object.__setattr__(self, "launch", LaunchOptions(nproc=1, placement="per-device", device=self.device,
                                                         run_dir=self.run_dir))

    to_argv = argv_of  # the command line that gives this config back


Config, Record = CeilingConfig, CeilingRecord


def run(config: CeilingConfig, observer: Observer = QUIET) -> CeilingRecord:
    from ..job.session import prepare, run_workload, Workload

    prepared = prepare(config.launch, with_memory=True)
    memory_plan.require_fits(*prepared, memory_need(config, prepared[1].host_only),
                             f"--bytes {human(config.bytes)} (a source and a destination buffer)",
                             "ceiling-too-large", hint="lower --bytes or --host-bytes")
    settings = CeilingSettings(bytes=config.bytes, host_bytes=config.host_bytes, iters=config.iters)
    session = run_workload(Workload("ceiling", settings), config.launch, "ceiling", observer, prepared=prepared)
    results: list[CeilingRankResult] = session.results
    if not results:
        return CeilingRecord(session=session.record)
    rank = results[0]
    return CeilingRecord(session=session.record, device_copy=rank.device_copy, host_to_device=rank.host_to_device,
                         device_to_host=rank.device_to_host)


def memory_need(config: CeilingConfig, host_only: bool) -> MemoryNeed:
    """A source and a destination of --bytes; on a device also --host-bytes on the device and in pinned host
    memory (one block: the host->device copy's source is cached and serves the device->host copy's destination)."""
    pair = 2 * config.bytes
    if host_only:
        return MemoryNeed(memory_plan.with_margin(pair), 0, f"per rank: source and destination {human_bytes(pair)}")
    pinned = memory_plan.pinned_block(config.host_bytes)
    return MemoryNeed(memory_plan.with_margin(pinned), memory_plan.with_margin(pair + config.host_bytes),
                      f"per rank: source and destination {human_bytes(pair)} and {human_bytes(config.host_bytes)} "
                      f"on the device, {human_bytes(pinned)} of pinned host memory")


def checks(record: CeilingRecord) -> list[Check]:
    d = record.device_copy
    return run_checks(record.session, NAME, lambda: [
        Check("device copy bandwidth", Verdict.INFO, f"{d.gbps:.0f} GB/s ({d.rw_gbps:.0f} GB/s read+write)",
              "informational", "the loopback ceiling: shared-device busbw cannot exceed it",
              "far below the datasheet's memory bandwidth: the copy path is broken")], warnings=False)


def summary(record: CeilingRecord) -> str:
    if not record.session.completed:
        return record.session.failure_reason()
    d = record.device_copy
    return f"device copy {d.gbps:.1f} GB/s ({d.rw_gbps:.1f} GB/s read+write)"
