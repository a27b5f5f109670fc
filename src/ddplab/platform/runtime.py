"""Device operations a rank needs, for any device type, without naming one.

Everything goes through ``torch.get_device_module(device_type)`` or ``torch.accelerator``; the host CPU is the
case with no device module work to do.
"""

from __future__ import annotations

import resource
import sys

from .vendors import HOST_CPU, NVIDIA, VENDORS

# The oldest torch whose FSDP2 (fully_shard) runs elsewhere than on NVIDIA's devices: 2.4 and 2.5 make CUDA streams
# whatever the mesh's device (read in their sources); 2.6 asks the device's own module, but the host's streams
# there have no record_event, so on the host it fails at the first forward (measured: 2.4.1, 2.6.0 fail, 2.7.1 runs).
FSDP2_ON_ANY_DEVICE_SINCE = (2, 6)
FSDP2_ON_HOST_SINCE = (2, 7)


def synchronize_device(device) -> None:
    """Wait for the work queued on ``device`` (a torch.device; the host has none). Through the device's torch
    module, which torch 2.4 has: ``torch.accelerator`` came in 2.6."""
    import torch

    if device is not None and device.type != HOST_CPU.device_type:
        torch.get_device_module(device.type).synchronize(device.index)


def fsdp2_unsupported(device_type: str, torch_version: str | None = None) -> str | None:
    """Why this torch's FSDP2 cannot shard a model on ``device_type``, in one sentence, or None where it can."""
    from ..basics.torch_floor import release

    if torch_version is None:
        import torch

        torch_version = str(torch.__version__)
    if device_type == NVIDIA.device_type:
        return None
    needed = FSDP2_ON_HOST_SINCE if device_type == HOST_CPU.device_type else FSDP2_ON_ANY_DEVICE_SINCE
    found = release(torch_version)
    if found is None or found >= needed:
        return None
    return (f"FSDP2 (fully_shard) on {device_type} needs torch {needed[0]}.{needed[1]} or newer; this is torch "
            f"{torch_version}")


def device_for_local_rank(local_rank: int):
    """(torch.device, backend) as a typical training script picks them where no plan says: this machine's
    accelerator, its devices shared round-robin by local rank (this rank's made current), with torch's default
    backend for it; else the host, with gloo. The accelerator is found as the probe finds it: torch 2.4 and 2.5 have
    no ``torch.accelerator``, and ``current_accelerator()`` alone fails or lies on a host without a device."""
    import torch
    import torch.distributed as dist

    from .probe import available_accelerator

    device_type, count = available_accelerator(torch)
    if device_type is None or count < 1:
        return torch.device(HOST_CPU.device_type), HOST_CPU.backend
    runtime = DeviceRuntime(device_type, local_rank % count)
    runtime.activate()
    # torch's own map, as init_process_group reads it; where this torch maps no backend to the device (torch 2.4 maps
    # cpu and cuda only), the vendor's
    backend = dist.Backend.default_device_backend_map.get(device_type) or VENDORS.get(device_type, HOST_CPU).backend
    return runtime.device, backend


class DeviceRuntime:
    def __init__(self, device_type: str, index: int):
        import torch

        self.torch = torch
        self.device_type = device_type
        self.index = index
        self.host_only = device_type == HOST_CPU.device_type
        self.module = None if self.host_only else torch.get_device_module(device_type)
        self.device = torch.device(device_type) if self.host_only else torch.device(device_type, index)
        self.fraction: float | None = None  # allocator cap, once cap_memory() set one

    def activate(self) -> None:
        if not self.host_only:
            self.module.set_device(self.index)

    def cap_memory(self, fraction: float | None) -> bool:
        """Cap this process's caching allocator. Returns False where there is nothing to cap."""
        if fraction is None or self.host_only:
            return False
        self.module.set_per_process_memory_fraction(float(fraction), self.index)
        self.fraction = float(fraction)
        return True

    def synchronize(self) -> None:
        if not self.host_only:
            self.module.synchronize(self.index)

    def reset_peak_memory(self) -> None:
        if not self.host_only and hasattr(self.module, "reset_peak_memory_stats"):
            self.module.reset_peak_memory_stats(self.index)

    def peak_memory_bytes(self) -> tuple[int, str]:
        """(bytes, how it was measured). On the host: this process's peak RSS."""
        if self.host_only:
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            # ru_maxrss is KiB on Linux, bytes on macOS.
            return (rss if sys.platform == "darwin" else rss * 1024), "host peak RSS (getrusage)"
        return int(self.module.max_memory_allocated(self.index)), "allocator peak (max_memory_allocated)"

    def allocator_cap_bytes(self, host_default: int = 256 << 20) -> int:
        """The bytes this rank may allocate: fraction x device memory, or a fixed cap on the host."""
        if self.host_only:
            return host_default
        return int(self.module.get_device_properties(self.index).total_memory * (self.fraction or 1.0))

    def memory_info(self) -> tuple[int, int] | None:
        """(free, total) bytes of this rank's device, every process on it counted; None where it cannot be said."""
        if self.host_only:
            return None
        query = (getattr(self.module, "mem_get_info", None)
                 or getattr(getattr(self.torch, "accelerator", None), "get_memory_info", None))
        if query is None:
            return None
        try:
            free, total = query(self.index)
        except RuntimeError:  # a device module that cannot say: not judged
            return None
        return int(free), int(total)

    def cap_room_bytes(self) -> int | None:
        """What this rank may still allocate under its allocator cap (None: no cap)."""
        reserved = getattr(self.module, "memory_reserved", None)
        if self.host_only or self.fraction is None or reserved is None:
            return None
        return max(0, self.allocator_cap_bytes() - int(reserved(self.index)))

    def release_caches(self, host: bool) -> bool:
        """Hand cached memory back between measurements: the device allocator's cache and, with ``host``, the
        pinned host allocator's cache (where a backend staged device tensors through host memory it keeps every
        block it used). Returns whether the host cache could be emptied."""
        if self.host_only:
            return False
        self.synchronize()
        empty_device = getattr(self.module, "empty_cache", None)
        if empty_device is not None:
            empty_device()
        if not host:
            return False
        # The pinned host allocator's empty-cache call: torch.accelerator.empty_host_cache where this torch has it,
        # else the private torch._C._host_emptyCache (torch 2.11 has it).
        empty = (getattr(getattr(self.torch, "accelerator", None), "empty_host_cache", None)
                 or getattr(self.torch._C, "_host_emptyCache", None))
        if empty is not None:
            empty()
        return empty is not None

    def new_event(self):
        if self.host_only:
            return None
        return self.module.Event(enable_timing=True)
