"""The platform layer: the one package in ddplab that knows vendors.

`grep -rn cuda src/ddplab` matches only files in this package. Everything else asks
for a ``Platform`` (what the machine is), a ``DeviceRuntime`` (device operations in a
rank) or a ``DeviceMonitor`` (memory per process), and stays vendor-neutral.

Each name is imported from its module when first asked for (PEP 562), so that reading a report's ``Platform``
(facts.py) loads neither the probe nor the device monitor.
"""

import importlib
import sys

_HOMES = {
    "DeviceInfo": "facts", "Platform": "facts",
    "Probe": "probe", "describe": "probe", "gather_probe": "probe", "whitelisted_environ": "probe",
    "available_accelerator": "probe",
    "DeviceMonitor": "device_monitor", "DeviceSample": "device_monitor", "open_monitor": "device_monitor",
    "DeviceRuntime": "runtime", "synchronize_device": "runtime", "device_for_local_rank": "runtime",
    "fsdp2_unsupported": "runtime", "VENDORS": "vendors",
}


def __getattr__(name: str):
    if name not in _HOMES:  # a submodule not imported yet: AttributeError lets `from . import it` load it
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)


def detect(device_request: str | None = None, with_memory: bool = True):
    """Probe this machine and decide its platform (a ``Platform``). The probe is the package's ``gather_probe``,
    asked through the package, so that a fake machine put in its place (tests/unit/fakes.py) is the one probed."""
    from .probe import describe

    return describe(sys.modules[__name__].gather_probe(with_memory=with_memory), device_request)
