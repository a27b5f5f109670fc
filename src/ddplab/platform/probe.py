"""Find out what this machine is: accelerator, plug-in, backends, library versions.

Two halves, so that vendors we cannot run here are still tested: ``gather_probe()`` asks the machine and returns
a plain ``Probe`` of facts; ``describe(probe)`` turns facts into a ``Platform`` decision without touching the
machine (unit tests feed it hand-made probes for MUSA, Ascend and XPU).
"""

from __future__ import annotations

import importlib
import os
import platform as _pyplatform
import shutil
import socket
from dataclasses import dataclass, field

from ..errors import EnvironmentUnsupported, invalid_choice
from . import collective_lib, device_monitor
from .facts import DeviceInfo, LoadedLibrary, Platform
from .vendors import HOST_CPU, KNOWN_BACKENDS, PLUGIN_ORDER, VENDORS, Vendor, env_whitelisted, read_knobs


@dataclass(frozen=True)
class Probe:
    """Raw facts about the machine. Built by gather_probe(), or by hand in tests."""

    torch_version: str
    accelerator: str | None  # device type torch reports as available, after plug-ins load
    plugins: dict[str, str | None] = field(default_factory=dict)  # module -> version, None if absent
    plugin_errors: dict[str, str] = field(default_factory=dict)  # module -> why the import failed
    device_count: int = 0
    devices: tuple[DeviceInfo, ...] = ()
    backends_available: dict[str, bool] = field(default_factory=dict)
    torch_default_backend: str | None = None  # what torch's own map says for the device
    collective_built_version: str | None = None
    collective_loaded_version: str | None = None  # of the copy calls bind to
    collective_loaded_path: str | None = None  # the copy calls bind to
    collective_loaded_copies: tuple[LoadedLibrary, ...] = ()  # every mapped copy
    management_tool_path: str | None = None
    driver_version: str | None = None
    sharing_daemon_running: bool | None = None  # None: this vendor has no such daemon
    sharing_daemon_control_path: str | None = None  # the daemon's control binary, when on PATH
    environ: dict[str, str] = field(default_factory=dict)  # whitelisted only
    host_memory: tuple[int, int] | None = None  # (total, available) bytes
    hostname: str = ""
    python_version: str = ""


def describe(probe: Probe, device_request: str | None = None) -> Platform:
    """Decide the device type and backend from the facts in ``probe`` and the user's ``--device`` (None or
    "auto": what is detected). UsageError for an unknown device, EnvironmentUnsupported for one not here."""
    validate_device_request(device_request)
    if device_request in (None, "auto"):
        device_type = probe.accelerator if probe.accelerator in VENDORS and probe.device_count > 0 else "cpu"
    elif device_request != "cpu" and (probe.accelerator != device_request or probe.device_count < 1):
        have = probe.accelerator if probe.device_count > 0 else "none"
        raise EnvironmentUnsupported(
            "device-unavailable",
            f'device "{device_request}" is not available on this machine (accelerator found: {have})',
            hint="run `ddplab env` to see what was detected, or use --device cpu",
        )
    else:
        device_type = device_request

    vendor = VENDORS[device_type]
    host_only = device_type == HOST_CPU.device_type
    daemon = vendor.multi_rank.sharing_daemon if vendor.multi_rank else None
    return Platform(
        device_type=device_type,
        vendor=vendor.vendor,
        plugin_module=vendor.plugin_module,
        plugin_version=probe.plugins.get(vendor.plugin_module) if vendor.plugin_module else None,
        torch_version=probe.torch_version,
        backend=vendor.backend,
        backend_available=bool(probe.backends_available.get(vendor.backend)),
        torch_default_backend=probe.torch_default_backend if not host_only else "gloo",
        collective_library=vendor.collective_library,
        collective_built_version=None if host_only else probe.collective_built_version,
        collective_loaded_version=None if host_only else probe.collective_loaded_version,
        collective_loaded_path=None if host_only else probe.collective_loaded_path,
        collective_loaded_copies=() if host_only else tuple(probe.collective_loaded_copies),
        # The host counts as one device that every rank shares.
        device_count=1 if host_only else probe.device_count,
        devices=(DeviceInfo(0, "host CPU", *(probe.host_memory or (None, None))),) if host_only else probe.devices,
        management_tool=vendor.management_tool,
        management_tool_path=None if host_only else probe.management_tool_path,
        driver_version=None if host_only else probe.driver_version,
        sharing_daemon=daemon,
        sharing_daemon_running=probe.sharing_daemon_running if daemon else None,
        sharing_daemon_control_path=probe.sharing_daemon_control_path if daemon else None,
        per_process_memory_api=vendor.per_process_memory_api,
        visible_devices_env=vendor.visible_devices_env,
        backends_available=dict(probe.backends_available),
        knobs=tuple(read_knobs(vendor, probe.environ)),
        environ=dict(probe.environ),
        hostname=probe.hostname,
        python_version=probe.python_version,
    )


def validate_device_request(device_request: str | None) -> None:
    """Reject an unknown --device before torch is even imported."""
    if device_request not in (None, "auto") and device_request not in VENDORS:
        raise invalid_choice("device", device_request, ["auto", *VENDORS])


# --- gathering facts from the real machine -----------------------------------------------------

def gather_probe(with_memory: bool = True) -> Probe:
    """Ask this machine. ``with_memory`` reads free device memory (NVML when present)."""
    import torch
    import torch.distributed as dist

    plugins, plugin_errors = _import_plugins()
    accelerator, count = available_accelerator(torch)
    vendor = VENDORS.get(accelerator or "", HOST_CPU)
    devices = _devices(torch, accelerator, count, with_memory)
    libraries = (collective_lib.find_copies(vendor.library_names, vendor.version_symbol,
                                            vendor.collective_linked_by)
                 if vendor.library_names else collective_lib.CollectiveLibraries(None, ()))
    loaded = libraries.bound
    return Probe(
        torch_version=torch.__version__,
        accelerator=accelerator,
        plugins=plugins,
        plugin_errors=plugin_errors,
        device_count=count,
        devices=devices,
        backends_available=_backends_available(dist),
        torch_default_backend=getattr(dist.Backend, "default_device_backend_map", {}).get(accelerator or "cpu"),
        collective_built_version=_built_version(torch, accelerator),
        collective_loaded_version=loaded.version if loaded else None,
        collective_loaded_path=loaded.path if loaded else None,
        collective_loaded_copies=libraries.copies,
        management_tool_path=shutil.which(vendor.management_tool) if vendor.management_tool else None,
        driver_version=device_monitor.driver_version(vendor),
        sharing_daemon_running=_daemon_running(vendor),
        sharing_daemon_control_path=(shutil.which(vendor.sharing_daemon_control)
                                     if vendor.sharing_daemon_control else None),
        environ=whitelisted_environ(os.environ),
        host_memory=host_memory(),
        hostname=socket.gethostname(),
        python_version=_pyplatform.python_version(),
    )


def whitelisted_environ(environ) -> dict[str, str]:
    """The variables ddplab knows, by exact name, with anything that looks like a secret redacted."""
    from ..basics.redaction import redact

    return {k: redact(k, v) for k, v in sorted(environ.items()) if env_whitelisted(k)}


def loopback_interface() -> str:
    """Name of the network interface that carries 127.0.0.1 ("lo" on Linux)."""
    import ipaddress

    import psutil

    for name, addresses in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and ipaddress.ip_address(a.address).is_loopback for a in addresses):
            return name
    return "lo"


def _import_plugins() -> tuple[dict[str, str | None], dict[str, str]]:
    versions: dict[str, str | None] = {}
    errors: dict[str, str] = {}
    for vendor in PLUGIN_ORDER:
        name = vendor.plugin_module
        try:
            versions[name] = str(getattr(importlib.import_module(name), "__version__", "unknown"))
        except ModuleNotFoundError:
            versions[name] = None
        except Exception as exc:  # a broken plug-in is worth reporting, not crashing on
            versions[name] = None
            errors[name] = f"{type(exc).__name__}: {exc}"
    return versions, errors


def available_accelerator(torch) -> tuple[str | None, int]:
    """(device type, device count) of the accelerator this process can use now; (None, 0) where there is none.
    ``current_accelerator()`` is asked only once ``is_available()`` said yes: torch 2.6 raises on a host without a
    device, and from 2.7 it names the accelerator torch was built for, present or not."""
    acc_api = getattr(torch, "accelerator", None)
    if acc_api is not None and hasattr(acc_api, "current_accelerator"):
        if not acc_api.is_available():
            return None, 0
        acc = acc_api.current_accelerator()
        return (acc.type if acc is not None else None), int(acc_api.device_count())
    # torch < 2.6: ask each known device module.
    for device_type in VENDORS:
        mod = getattr(torch, device_type, None)
        if device_type != "cpu" and mod is not None and getattr(mod, "is_available", lambda: False)():
            return device_type, int(mod.device_count())
    return None, 0


def _devices(torch, accelerator, count, with_memory) -> tuple[DeviceInfo, ...]:
    if not accelerator or count < 1:
        return ()
    mod = torch.get_device_module(accelerator)
    memory = device_monitor.device_memory(VENDORS.get(accelerator), torch, count) if with_memory else {}
    infos = []
    for i in range(count):
        name = mod.get_device_name(i) if hasattr(mod, "get_device_name") else accelerator
        total, free = memory.get(i, (None, None))
        infos.append(DeviceInfo(i, name, total, free))
    return tuple(infos)


def _backends_available(dist) -> dict[str, bool]:
    out = {}
    for name in KNOWN_BACKENDS:
        checker = getattr(dist, f"is_{name}_available", None)
        try:
            if checker is not None:
                out[name] = bool(checker())
            else:  # plug-in backends register themselves by name
                out[name] = name in getattr(dist.Backend, "backend_list", [])
        except Exception:
            out[name] = False
    return out


def _built_version(torch, accelerator) -> str | None:
    if accelerator != "cuda":  # only NVIDIA exposes the version torch was compiled against
        return None
    try:
        v = torch.cuda.nccl.version()
        return ".".join(str(p) for p in v) if isinstance(v, tuple) else collective_lib.decode_version(v)
    except Exception:
        return None


def host_memory() -> tuple[int, int]:
    """(total, available) bytes of host memory now (MemAvailable on Linux)."""
    import psutil

    vm = psutil.virtual_memory()
    return int(vm.total), int(vm.available)


def _daemon_running(vendor: Vendor) -> bool | None:
    """A sharing daemon our ranks would reach (not another run's private one)."""
    if not vendor.sharing_daemon_processes:
        return None
    from .sharing_daemon import running_daemons

    return bool(running_daemons(vendor))
