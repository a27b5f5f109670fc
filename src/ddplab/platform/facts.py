"""What a report says about the machine it ran on: the ``Platform`` ddplab decided (probe.py), its devices, the
collective library's mapped copies. Apart from the probe, so that reading a report asks nothing of the machine."""

from __future__ import annotations

from dataclasses import dataclass

from .vendors import HOST_CPU, VENDORS, KnobReading, Vendor


@dataclass(frozen=True)
class LoadedLibrary:
    path: str
    version: str | None  # "2.30.7"; None when the library could not be asked
    bound_via: str | None = None  # how calls reach this copy; None: this copy is mapped but not bound


@dataclass(frozen=True)
class DeviceInfo:
    index: int
    name: str
    total_bytes: int | None = None
    free_bytes: int | None = None


@dataclass(frozen=True, kw_only=True)
class Platform:
    """What ddplab decided this machine is. Serialised into every report."""

    device_type: str
    vendor: str
    plugin_module: str | None
    plugin_version: str | None
    torch_version: str
    backend: str  # the vendor's collective backend for this device
    backend_available: bool
    torch_default_backend: str | None
    collective_library: str | None
    collective_built_version: str | None
    collective_loaded_version: str | None
    collective_loaded_path: str | None
    collective_loaded_copies: tuple[LoadedLibrary, ...] = ()  # reports before it: none
    device_count: int
    devices: tuple[DeviceInfo, ...]
    management_tool: str | None
    management_tool_path: str | None
    driver_version: str | None
    sharing_daemon: str | None
    sharing_daemon_running: bool | None
    sharing_daemon_control_path: str | None = None
    per_process_memory_api: str | None
    visible_devices_env: str | None
    backends_available: dict[str, bool]
    knobs: tuple[KnobReading, ...]
    environ: dict[str, str]
    hostname: str
    python_version: str

    @property
    def spec(self) -> Vendor:
        return VENDORS[self.device_type]

    @property
    def host_only(self) -> bool:
        return self.device_type == HOST_CPU.device_type
