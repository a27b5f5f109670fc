"""Memory planning's records (platform/memory_plan.py): what the machine had at one moment, what one measurement needs,
and the one against the other for all ranks of the machine together."""

from __future__ import annotations

from dataclasses import dataclass, field

from .codec import OMIT


@dataclass(frozen=True)
class MachineMemory:
    """What this machine had for the next allocation, read at one moment (memory_plan.read_machine).

    ``host_available_bytes`` is the smallest headroom of MemAvailable, every cgroup limit above the process
    and a budget given in DDPLAB_HOST_MEMORY_BUDGET, less a reserve for everything else on the machine;
    ``host_source`` says which bound it and how it was read. None: nothing could be read (not judged)."""

    host_available_bytes: int | None
    host_source: str
    device_free_bytes: int | None = field(default=None, metadata=OMIT)  # the rank's device, less a reserve
    device_cap_bytes: int | None = field(default=None, metadata=OMIT)  # room left under the rank's allocator cap


@dataclass(frozen=True)
class MemoryNeed:
    """What one measurement adds, per rank, to what the rank already holds (memory_plan.collective_need)."""

    host_bytes: int
    device_bytes: int  # 0 where the ranks run on the host: their buffers are in ``host_bytes``
    method: str  # the parts, in words


@dataclass(frozen=True)
class MemoryFit:
    """One measurement against the machine (memory_plan.judge): needed and available, for every rank of this
    machine on the host and every rank of the busiest device on it; ``reason`` says why it does not fit."""

    fits: bool
    host_needed_bytes: int
    host_available_bytes: int | None
    device_needed_bytes: int | None = field(default=None, metadata=OMIT)  # None: the ranks run on the host
    device_available_bytes: int | None = field(default=None, metadata=OMIT)
    reason: str | None = field(default=None, metadata=OMIT)  # None when it fits
    method: str = ""  # the per-rank need in words, and where the available numbers came from


@dataclass(frozen=True)
class MemoryShare:
    """How many ranks draw on this machine's host memory and on its busiest device (the launcher's placement), so
    that a rank plans for all of them (workloads/memory.py)."""

    ranks_on_machine: int
    ranks_on_device: int

    @classmethod
    def of(cls, placement) -> "MemoryShare":
        indices = placement.device_indices
        return cls(len(indices), max(indices.count(i) for i in set(indices)) if indices else 1)
