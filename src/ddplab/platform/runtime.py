"""Device operations a rank needs, for any device type, without naming one.

Everything goes through ``torch.get_device_module(device_type)`` (torch.cuda,
torch.musa, torch.npu, torch.xpu) or ``torch.accelerator``; the host CPU is the
case with no device module work to do.
"""

from __future__ import annotations

import resource
import sys

from .vendors import HOST_CPU


class DeviceRuntime:
    def __init__(self, device_type: str, index: int):
        import torch

        self.torch = torch
        self.device_type = device_type
        self.index = index
        self.is_host = device_type == HOST_CPU.device_type
        self.module = None if self.is_host else torch.get_device_module(device_type)
        self.device = torch.device(device_type) if self.is_host else torch.device(device_type, index)
        self.fraction: float | None = None  # allocator cap, once cap_memory() set one

    def activate(self) -> None:
        if not self.is_host:
            self.module.set_device(self.index)

    def cap_memory(self, fraction: float | None) -> bool:
        """Cap this process's caching allocator. Returns False where there is nothing to cap."""
        if fraction is None or self.is_host:
            return False
        self.module.set_per_process_memory_fraction(float(fraction), self.index)
        self.fraction = float(fraction)
        return True

    def synchronize(self) -> None:
        if not self.is_host:
            self.module.synchronize(self.index)

    def reset_peak_memory(self) -> None:
        if not self.is_host and hasattr(self.module, "reset_peak_memory_stats"):
            self.module.reset_peak_memory_stats(self.index)

    def peak_memory_bytes(self) -> tuple[int, str]:
        """(bytes, how it was measured). On the host: this process's peak RSS."""
        if self.is_host:
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            # ru_maxrss is KiB on Linux, bytes on macOS.
            return (rss if sys.platform == "darwin" else rss * 1024), "host peak RSS (getrusage)"
        return int(self.module.max_memory_allocated(self.index)), "allocator peak (max_memory_allocated)"

    def allocator_cap_bytes(self, host_default: int = 256 << 20) -> int:
        """The bytes this rank may allocate: fraction x device memory, or a fixed cap on the host."""
        if self.is_host:
            return host_default
        total = self.module.get_device_properties(self.index).total_memory
        fraction = self.fraction or 1.0
        return int(total * fraction)

    def new_event(self):
        """A device timing event, or None on the host."""
        if self.is_host:
            return None
        return self.module.Event(enable_timing=True)

    def device_label(self) -> str:
        return str(self.device)
