"""The platform layer: the one package in ddplab that knows vendors.

`grep -rn cuda src/ddplab` matches only files in this package. Everything else asks
for a ``Platform`` (what the machine is), a ``DeviceRuntime`` (device operations in a
rank) or a ``DeviceMonitor`` (memory per process), and stays vendor-neutral.
"""

from .detect import DeviceInfo, Platform, Probe, describe, gather_probe, validate_device_request, whitelisted_environ
from .device_monitor import DeviceMonitor, DeviceSample, open_monitor
from .runtime import DeviceRuntime
from .vendors import HOST_CPU, KNOWN_BACKENDS, VENDORS, Vendor


def detect(device_request: str | None = None, with_memory: bool = True) -> Platform:
    """Probe this machine and decide its platform."""
    return describe(gather_probe(with_memory=with_memory), device_request)


__all__ = [
    "DeviceInfo", "DeviceMonitor", "DeviceRuntime", "DeviceSample", "HOST_CPU", "KNOWN_BACKENDS",
    "Platform", "Probe", "VENDORS", "Vendor", "describe", "detect", "gather_probe", "open_monitor",
    "validate_device_request", "whitelisted_environ",
]
