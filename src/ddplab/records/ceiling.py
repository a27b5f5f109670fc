"""The loopback ceiling's records: copy rates measured by the one rank, and the ceiling as reported."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from .codec import FLATTEN, OMIT
from .session import SessionRecord, session_parts


@dataclass(frozen=True)
class CeilingSettings:
    """What the ceiling's rank copies (rank side of config.CeilingConfig)."""

    bytes: int
    host_bytes: int
    iters: int


@dataclass(frozen=True)
class CopyRate:
    """One copy path: the median of ``iters`` timed copies of ``size_bytes`` (workloads/ceiling.py)."""

    size_bytes: int
    time_us: float
    gbps: float  # copy rate: bytes counted once, GB = 1e9
    method: str
    iters: int


@dataclass(frozen=True)
class DeviceCopy(CopyRate):
    """The device-to-device copy, also as memory traffic: every byte is read and written."""

    rw_gbps: float


@dataclass(frozen=True)
class CeilingRankResult:
    """What the ceiling's rank measured; host<->device only on an accelerator."""

    device_copy: DeviceCopy
    host_to_device: CopyRate | None = field(default=None, metadata=OMIT)
    device_to_host: CopyRate | None = field(default=None, metadata=OMIT)


@dataclass(frozen=True)
class CeilingRecord:
    """The ceiling as reported: the session and, when its rank finished, the copy rates. No ``timed_rows``:
    `compare` lines up collectives, storms and train runs, not copies."""

    session: SessionRecord = field(metadata=FLATTEN)
    device_copy: DeviceCopy | None = field(default=None, metadata=OMIT)
    host_to_device: CopyRate | None = field(default=None, metadata=OMIT)
    device_to_host: CopyRate | None = field(default=None, metadata=OMIT)

    json_parts = partial(session_parts, CeilingRankResult)  # placement, ranks' results: checked when read back
