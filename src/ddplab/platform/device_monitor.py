"""Device memory and utilisation, per device and per process, from the vendor's management library (NVML on
NVIDIA). Other vendors expose no per-process memory API ddplab can call yet; their monitor says so.

NVML returns host PIDs, which differ from /proc inside a container without the host PID namespace; the report
records them as NVML gave them.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field

from .vendors import NVIDIA, Vendor


@dataclass
class DeviceSample:
    """One reading. Empty dicts mean "not available", never zero."""

    process_mem_bytes: dict[int, int] = field(default_factory=dict)  # pid -> bytes on all devices
    process_util_pct: dict[int, int] = field(default_factory=dict)  # pid -> SM % (NVML samples)
    device_used_bytes: dict[int, int] = field(default_factory=dict)  # device index -> bytes
    device_util_pct: dict[int, int] = field(default_factory=dict)  # device index -> %


class DeviceMonitor:
    """No per-process device data on this platform."""

    api: str | None = None

    def sample(self) -> DeviceSample:
        return DeviceSample()

    def close(self) -> None:
        pass


class NvmlMonitor(DeviceMonitor):
    api = "NVML"

    def __init__(self):
        import pynvml

        self._nvml = pynvml
        pynvml.nvmlInit()
        self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        self._last_seen = [0] * len(self._handles)

    def sample(self) -> DeviceSample:
        nv = self._nvml
        out = DeviceSample()
        for i, h in enumerate(self._handles):
            with contextlib.suppress(nv.NVMLError):
                mem = nv.nvmlDeviceGetMemoryInfo(h)
                out.device_used_bytes[i] = int(mem.used)
                out.device_util_pct[i] = int(nv.nvmlDeviceGetUtilizationRates(h).gpu)
            with contextlib.suppress(nv.NVMLError):
                for p in nv.nvmlDeviceGetComputeRunningProcesses(h):
                    used = p.usedGpuMemory or 0  # None when the driver cannot tell
                    out.process_mem_bytes[p.pid] = out.process_mem_bytes.get(p.pid, 0) + int(used)
            with contextlib.suppress(nv.NVMLError):  # NOT_FOUND when there are no new samples
                samples = nv.nvmlDeviceGetProcessUtilization(h, self._last_seen[i])
                for s in samples:
                    out.process_util_pct[s.pid] = max(out.process_util_pct.get(s.pid, 0), int(s.smUtil))
                    self._last_seen[i] = max(self._last_seen[i], int(s.timeStamp))
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._nvml.nvmlShutdown()


def open_monitor(vendor: Vendor) -> DeviceMonitor:
    """The best monitor for this vendor; a null monitor when its library is absent."""
    if vendor.per_process_memory_api == NVIDIA.per_process_memory_api:
        with contextlib.suppress(Exception):
            return NvmlMonitor()
    return DeviceMonitor()


@contextlib.contextmanager
def _nvml_session():
    import pynvml

    pynvml.nvmlInit()
    try:
        yield pynvml
    finally:
        pynvml.nvmlShutdown()


def driver_version(vendor: Vendor | None) -> str | None:
    if vendor is None or vendor.per_process_memory_api != NVIDIA.per_process_memory_api:
        return None
    with contextlib.suppress(Exception), _nvml_session() as nvml:
        v = nvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    return None


def device_memory(vendor: Vendor | None, torch, count: int) -> dict[int, tuple[int, int]]:
    """{torch device index: (total, free)} bytes, device-wide. NVML reads it without creating a device context in
    this process; other vendors fall back to torch's accelerator API, which does create one."""
    if vendor is not None and vendor.per_process_memory_api == NVIDIA.per_process_memory_api:
        with contextlib.suppress(Exception), _nvml_session() as nvml:
            handles = [nvml.nvmlDeviceGetHandleByIndex(n) for n in _visible_nvml_indices(count)]
            return {i: (int(m.total), int(m.free))
                    for i, m in enumerate(nvml.nvmlDeviceGetMemoryInfo(h) for h in handles)}
    out = {}
    getter = getattr(getattr(torch, "accelerator", None), "get_memory_info", None)
    mod = torch.get_device_module(vendor.device_type) if vendor else None
    for i in range(count):
        with contextlib.suppress(Exception):
            free, total = getter(i) if getter else mod.mem_get_info(i)
            out[i] = (int(total), int(free))
    return out


def _visible_nvml_indices(count: int) -> list[int]:
    """Map torch indices to NVML indices through CUDA_VISIBLE_DEVICES when it lists integers."""
    visible = os.environ.get(NVIDIA.visible_devices_env or "", "")
    if visible:
        with contextlib.suppress(ValueError):  # UUIDs or MIG names: assume identity order
            return [int(x) for x in visible.split(",") if x.strip()][:count]
    return list(range(count))
