"""Memory planning: before a measurement allocates, what it needs on the device and on the host, against what
this machine and its cgroup have, for every rank of the machine together.

Why: gloo copies every device tensor a call is given into pinned host memory, a pipelined size keeps ``-n`` calls
in flight, each with its own copies, and torch's caching host allocator keeps every block between sizes: RSS grows
until the kernel kills a rank and the report says only "Signal 9". So a measurement that cannot fit is skipped
with its ``MemoryFit`` (needed vs available), never run into the OOM killer; a single-size stage is refused before
it starts (``require_fits``); ``release`` hands the caches back between sizes. Numbers: docs/metrics.md.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from .. import collectives
from ..collectives.common import GLOO_COPIES_INPUT, GLOO_COPIES_OUTPUT, Buffers, index_bytes
from ..records.memory import MachineMemory, MemoryFit, MemoryNeed
from ..basics.sizes import human_bytes as _h, parse_size

# Host bytes this machine's ranks may add (K/M/G suffixes), to plan as if the machine had only that much free;
# unset: no budget. A value that is not a size is a UsageError (exit 2).
BUDGET_ENV = "DDPLAB_HOST_MEMORY_BUDGET"
# ProcessGroupGloo runs calls on its worker threads (2 by default): at most this many hold gloo's own buffers.
GLOO_RUNNING_CALLS = 2
GLIBC_MMAP_THRESHOLD_MAX = 32 << 20  # glibc maps blocks above this and returns them when freed (64-bit Linux)
# Left for everything else on the machine: estimates are estimates, and the kernel kills at zero, not below.
HOST_RESERVE_FRACTION, HOST_RESERVE_MIN, HOST_RESERVE_MAX = 0.05, 256 << 20, 4 << 30
DEVICE_RESERVE_FRACTION = 0.05
UNLIMITED = 1 << 60  # cgroup v1 writes "no limit" as a number near 2**63
# On top of the count, for what it cannot see (allocators' rounding, glibc's heap, gloo's transfer buffers): a
# size's RSS was measured at up to 1.52 x its count under load (docs/metrics.md), so 60 % of it again.
MARGIN_FRACTION, MARGIN_MIN = 0.6, 16 << 20


@dataclass(frozen=True)
class Route:
    """Where a backend's calls put a collective's data on one rank."""

    host_only: bool  # the ranks' tensors are host memory
    staged: bool  # gloo on device tensors: each call copies every tensor it is given into pinned host memory
    gloo: bool  # gloo makes copies of its own for some collectives (gloo_copies)

    @classmethod
    def of(cls, backend: str, host_only: bool) -> "Route":
        gloo = backend == "gloo"
        return cls(host_only=host_only, staged=gloo and not host_only, gloo=gloo)


def pinned_block(nbytes: int) -> int:
    """What torch's caching host allocator takes for ``nbytes``: the next power of two."""
    return 1 << (nbytes - 1).bit_length() if nbytes > 1 else nbytes


def check_scratch_bytes(numel: int, elem: int) -> int:
    """What filling and checking exact data (collectives/common.py) allocate at once beside the buffers, at most:
    the index, the running sum and the next rank's values, the expected result (all of the largest buffer), and
    the comparison's booleans."""
    return numel * (index_bytes(numel) + 3 * elem + 1)


def gloo_copies(op: str, buffers: Buffers, elem: int, in_flight: int) -> tuple[int, bool]:
    """Copies of the whole (largest) buffer gloo itself makes for one size, and whether they sit beside the tensors
    (on the device, for device tensors) rather than on the host; the collective's spec says which kind it makes:
    - GLOO_COPIES_OUTPUT (all_gather): a flat host copy of the output per call it runs; above glibc's mmap
      threshold a block is unmapped when freed (only gloo's running calls hold one), below it every copy stays;
    - GLOO_COPIES_INPUT (reduce_scatter): a clone of the whole input, kept until the call is waited for;
    - none: the buffers are used as they are."""
    kind = collectives.get(op).gloo_copies
    if kind == GLOO_COPIES_INPUT:
        return in_flight, True
    if kind == GLOO_COPIES_OUTPUT:
        big = buffers.largest * elem > GLIBC_MMAP_THRESHOLD_MAX
        return (min(in_flight, GLOO_RUNNING_CALLS) if big else in_flight + GLOO_RUNNING_CALLS), False
    return 0, False


def collective_need(op: str, buffers: Buffers, elem: int, route: Route, in_flight: int = 1,
                    check_data: bool = True) -> MemoryNeed:
    """Per rank, what one (collective, size, placement) adds: its buffers and check data where the ranks' tensors
    live; with gloo on device tensors, ``in_flight`` calls' pinned copies of every tensor a call is given (a
    pipelined size issues -n calls before it waits for one); gloo's own copies (``gloo_copies``)."""
    local = buffers.allocated * elem
    scratch = check_scratch_bytes(buffers.largest, elem) if check_data else 0
    where = "host" if route.host_only else "device"
    parts = [f"buffers {_h(local)}" + (f" and check data up to {_h(scratch)}" if scratch else "") + f" ({where})"]
    pinned = in_flight * sum(pinned_block(n * elem) for n in buffers.passed) if route.staged else 0
    if pinned:
        parts.append(f"{in_flight} call(s) in flight x {_h(pinned // in_flight)} of pinned host copies (gloo "
                     f"stages device tensors through host memory; blocks rounded up to powers of 2)")
    copies, beside = gloo_copies(op, buffers, elem, in_flight) if route.gloo else (0, False)
    own = copies * buffers.largest * elem
    if own:
        parts.append(f"gloo's own copies {copies} x {_h(buffers.largest * elem)} "
                     f"({where if beside else 'host'})")
    on_ranks_memory = local + scratch + (own if beside else 0)  # where the ranks' tensors live
    host = with_margin(pinned + (0 if beside else own) + (on_ranks_memory if route.host_only else 0))
    device = 0 if route.host_only else with_margin(on_ranks_memory)
    parts.append(f"each total + {MARGIN_FRACTION:.0%} (at least {_h(MARGIN_MIN)}) for what the count cannot see")
    return MemoryNeed(host_bytes=host, device_bytes=device, method="per rank: " + "; ".join(parts))


def with_margin(nbytes: int) -> int:
    return nbytes + max(MARGIN_MIN, int(MARGIN_FRACTION * nbytes)) if nbytes else 0


def judge(need: MemoryNeed, machine: MachineMemory, ranks_on_machine: int, ranks_on_device: int,
          host_only: bool) -> MemoryFit:
    """``need`` (per rank) for every rank of this machine on the host and of the busiest device on it."""
    host_needed = need.host_bytes * ranks_on_machine
    host_room = machine.host_available_bytes
    reason = None
    if host_room is not None and host_needed > host_room:
        reason = (f"needs {_h(host_needed)} of host memory for {ranks_on_machine} rank(s) on this machine "
                  f"({_h(need.host_bytes)} each), {_h(host_room)} available ({machine.host_source})")
    device_needed = None if host_only else need.device_bytes * ranks_on_device
    free, cap = machine.device_free_bytes, machine.device_cap_bytes
    if reason is None and device_needed is not None and free is not None and device_needed > free:
        reason = (f"needs {_h(device_needed)} of device memory for {ranks_on_device} rank(s) on the device "
                  f"({_h(need.device_bytes)} each), {_h(free)} free (less a {DEVICE_RESERVE_FRACTION:.0%} reserve)")
    if reason is None and not host_only and cap is not None and need.device_bytes > cap:
        reason = (f"needs {_h(need.device_bytes)} of device memory per rank, {_h(cap)} left under the rank's "
                  f"allocator cap")
    return MemoryFit(fits=reason is None, host_needed_bytes=host_needed, host_available_bytes=host_room,
                     device_needed_bytes=device_needed, device_available_bytes=None if host_only else free,
                     reason=reason, method=f"{need.method}; host: {machine.host_source}")


# ---------------------------------------------------------------------------------------------- the machine

@dataclass(frozen=True)
class CgroupLimit:
    """One memory limit above this process (cgroup v2 memory.max, or v1 memory.limit_in_bytes)."""

    where: str
    limit: int
    usage: int
    reclaimable: int = 0  # inactive page cache the kernel drops before it kills

    @property
    def headroom(self) -> int:
        return max(0, min(self.limit, self.limit - self.usage + self.reclaimable))


def cgroup_limits(self_cgroup: str, root: Path) -> list[CgroupLimit]:
    """Every memory limit above this process, from /proc/self/cgroup's text and the cgroup mount at ``root``:
    v2 (``0::/path``, each ancestor's memory.max) and v1 (the memory controller's memory.limit_in_bytes)."""
    found: list[CgroupLimit] = []
    for line in self_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            found += _v2_limits(root, path)
        elif "memory" in controllers.split(","):
            found += _v1_limit(root / "memory", path)
    return found


def _v2_limits(root: Path, path: str) -> list[CgroupLimit]:
    out = []
    here = root / path.strip("/")
    for directory in (here, *here.parents):
        if not str(directory).startswith(str(root)):
            continue
        limit = _read_int(directory / "memory.max")
        usage = _read_int(directory / "memory.current")
        if limit is None or usage is None or limit >= UNLIMITED:
            continue
        out.append(CgroupLimit(f"v2 {directory} memory.max - memory.current", limit, usage,
                               _number(directory / "memory.stat", r"^inactive_file (\d+)$") or 0))
    return out


def _v1_limit(mount: Path, path: str) -> list[CgroupLimit]:
    for directory in (mount / path.strip("/"), mount):  # a container sees its own cgroup at the mount's root
        limit = _read_int(directory / "memory.limit_in_bytes")
        usage = _read_int(directory / "memory.usage_in_bytes")
        if limit is not None and usage is not None:
            if limit >= UNLIMITED:
                return []
            return [CgroupLimit(f"v1 {directory} memory.limit_in_bytes - memory.usage_in_bytes", limit, usage,
                                _number(directory / "memory.stat", r"^total_inactive_file (\d+)$") or 0)]
    return []


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if text == "max":
        return UNLIMITED
    return int(text) if text.isdigit() else None


def _number(path: Path, line: str) -> int | None:
    """The number a /proc or cgroup file's ``line`` (a pattern) holds; None: no such file or line."""
    try:
        match = re.search(line, path.read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(match.group(1)) if match else None


def host_headroom(total: int | None, available: int | None, cgroups: list[CgroupLimit],
                  budget: int | None = None) -> tuple[int | None, str]:
    """The host bytes the ranks may add, and in words which bound it: the tightest of MemAvailable and every
    cgroup limit, less a reserve (5% of that bound's size, 256 MiB to 4 GiB), or a smaller budget."""
    bounds = [(c.headroom, c.limit, f"cgroup {c.where}: {_h(c.limit)} - {_h(c.usage)} + inactive file "
                                    f"{_h(c.reclaimable)}") for c in cgroups]
    if available is not None:
        bounds.append((available, total or available, f"MemAvailable {_h(available)} of {_h(total)}"))
    room, source = None, "host memory could not be read"
    if bounds:
        headroom, size, words = min(bounds, key=lambda b: b[0])
        reserve = min(HOST_RESERVE_MAX, max(HOST_RESERVE_MIN, int(HOST_RESERVE_FRACTION * size)))
        room, source = max(0, headroom - reserve), f"{words}, less a reserve of {_h(reserve)}"
    if budget is not None and (room is None or budget < room):
        room, source = budget, f"{BUDGET_ENV}={_h(budget)}"
    return room, source


def read_machine(runtime=None, environ: Mapping[str, str] = os.environ,
                 host_memory: Callable[[], tuple[int, int]] | None = None,
                 proc_self_cgroup: Path = Path("/proc/self/cgroup"),
                 cgroup_root: Path = Path("/sys/fs/cgroup")) -> MachineMemory:
    """This machine's numbers now; with a rank's ``runtime`` (platform.DeviceRuntime), its device's too."""
    if host_memory is None:
        from .probe import host_memory
    try:
        total, available = host_memory()
    except Exception:  # noqa: BLE001 - no reading is "not judged", never a crash
        total = available = None
    try:
        cgroups = cgroup_limits(proc_self_cgroup.read_text(), cgroup_root)
    except OSError:
        cgroups = []
    budget = environ.get(BUDGET_ENV, "").strip()
    room, source = host_headroom(total, available, cgroups, parse_size(budget, BUDGET_ENV) if budget else None)
    free = cap = None
    if runtime is not None and not runtime.host_only:
        info = runtime.memory_info()
        if info is not None:
            free = max(0, info[0] - int(DEVICE_RESERVE_FRACTION * info[1]))
        cap = runtime.cap_room_bytes()
    return MachineMemory(host_available_bytes=room, host_source=source, device_free_bytes=free, device_cap_bytes=cap)


def launcher_fit(platform, placement, need: MemoryNeed, machine: MachineMemory | None = None) -> MemoryFit:
    """``need`` (per rank) against this machine before any rank starts: the host for all of the launcher's ranks,
    each device for the ranks placed on it (its free memory from the platform probe, and each rank's allocator
    cap). The first device that cannot hold its ranks decides; else the busiest one is reported."""
    host = machine or read_machine()
    indices = placement.device_indices
    if placement.host_only or not platform.devices:
        return judge(need, host, len(indices), len(indices), host_only=placement.host_only)
    fits = []
    for index in sorted(set(indices)):
        device = platform.devices[index] if index < len(platform.devices) else None
        free = total = None
        if device is not None and device.free_bytes is not None:
            total = device.total_bytes or device.free_bytes
            free = max(0, device.free_bytes - int(DEVICE_RESERVE_FRACTION * total))
        cap = (int(placement.memory_fraction * device.total_bytes)
               if placement.memory_fraction_enforced and device is not None and device.total_bytes else None)
        numbers = MachineMemory(host.host_available_bytes, host.host_source, free, cap)
        fits.append(judge(need, numbers, len(indices), indices.count(index), host_only=False))
    return next((f for f in fits if not f.fits), max(fits, key=lambda f: f.device_needed_bytes or 0))


def require_fits(platform, placement, need: MemoryNeed, what: str, reference: str, hint: str,
                 machine: MachineMemory | None = None) -> MemoryFit:
    """Refuse, before any rank starts, a stage whose need this machine cannot hold (UsageError, exit 2, as
    policy.require_fits): "``what`` needs ..., ... available (where that came from)". Returns the fit."""
    from ..errors import UsageError

    fit = launcher_fit(platform, placement, need, machine)
    if not fit.fits:
        raise UsageError(reference, f"{what} {fit.reason}", hint=hint)
    return fit


# ---------------------------------------------------------------------------------------------- between sizes

def release(runtime, staged: bool) -> bool:
    """Hand back what the last size left cached: Python's garbage, the device allocator's cache, the pinned host
    cache where gloo staged through it, and the C heap's free pages (glibc keeps freed blocks below its mmap
    threshold in RSS; malloc_trim(0) returns them). Returns whether the pinned host cache was emptied."""
    gc.collect()
    emptied = runtime.release_caches(host=staged)
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):  # not glibc (musl has no malloc_trim)
            ctypes.CDLL(None).malloc_trim(0)
    return emptied


class PeakRss:
    """This process's RSS now and its peak since the last ``reset`` (/proc/self/status VmRSS and VmHWM; writing 5
    to /proc/self/clear_refs resets VmHWM, Linux >= 4.0). Where the reset is refused, the peak is the largest
    RSS read at ``reset`` and ``peak`` (a floor: a peak between them is missed)."""

    def __init__(self, status: Path = Path("/proc/self/status"), clear_refs: Path = Path("/proc/self/clear_refs")):
        self.status, self.clear_refs = status, clear_refs
        self.resettable = True
        self.floor = 0

    def reset(self) -> int:
        """Start a new peak; returns the RSS now."""
        if self.resettable:
            try:
                self.clear_refs.write_text("5")
            except OSError:
                self.resettable = False
        self.floor = self.now()
        return self.floor

    def now(self) -> int | None:
        """None where /proc cannot be read (not Linux)."""
        return self._field("VmRSS")

    def peak(self) -> int | None:
        now = self.now()
        if now is None:
            return None
        hwm = self._field("VmHWM") if self.resettable else None
        return max(hwm or 0, self.floor or 0, now)

    def _field(self, name: str) -> int | None:
        kib = _number(self.status, rf"^{name}:\s+(\d+) kB")
        return kib * 1024 if kib is not None else None
