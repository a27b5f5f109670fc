"""Placement policy: which device each rank uses, its memory cap, the backend and the sharing daemon.

Pure decisions over a ``Platform`` and ``LaunchOptions`` (no probing, so every vendor's branch is unit-tested with
hand-made platforms). Every choice carries its reason in words ("why gloo and not NCCL?" is the user's first
question), with every option considered where several ranks share a device. The session starts the daemon.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..records.config import LaunchOptions
from ..errors import EnvironmentUnsupported, UsageError
from ..platform import Platform
from ..platform.collective_lib import version_tuple
from ..platform.vendors import SharedDeviceCosts
from ..basics.sizes import human_bytes
from ..records.placement import PRIVATE_DAEMON, RUNNING_DAEMON, Option, Placement

_EPS = 1e-9


@dataclass(frozen=True)
class _Daemon:
    """Can this run have the sharing daemon, and in words why (not)."""

    kind: str | None  # PRIVATE_DAEMON, RUNNING_DAEMON, or None: not available
    why: str
    failed: bool = False  # it was tried and could not be used: worth a warning


@dataclass(frozen=True)
class _Choice:
    backend: str
    reason: str
    env: dict[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    expected_failure: str | None = None
    sharing_daemon: str | None = None
    considered: tuple[Option, ...] = ()


def plan(opts: LaunchOptions, platform: Platform, daemon_failure: str | None = None) -> Placement:
    """Decide placement, backend and daemon; ``daemon_failure``: why the first plan's daemon could not be used."""
    daemon = _daemon_availability(opts, platform, daemon_failure)
    shared = _decide_sharing(opts, platform)
    indices = _device_indices(opts, platform, shared)
    per_device = max(indices.count(i) for i in set(indices))
    shared = per_device > 1
    fraction = _memory_fraction(opts, shared, per_device)
    choice = _choose_backend(opts, platform, shared, daemon)
    return Placement(
        shared_device=shared,
        device_type=platform.device_type,
        device_indices=indices,
        memory_fraction=fraction,
        memory_fraction_enforced=fraction is not None and not platform.host_only,
        backend=choice.backend,
        backend_reason=choice.reason,
        env=choice.env,
        warnings=choice.warnings,
        expected_failure=choice.expected_failure,
        host_only=platform.host_only,
        sharing_daemon=choice.sharing_daemon,
        considered=choice.considered,
    )


def _daemon_availability(opts: LaunchOptions, platform: Platform, failure: str | None) -> _Daemon:
    """Whether this run can have the sharing daemon. ``--mps`` where it cannot is refused (exit 3)."""
    control, name = platform.spec.sharing_daemon_control, platform.sharing_daemon
    if not control or not name:
        if opts.sharing_daemon == "on":
            raise EnvironmentUnsupported(
                "no-sharing-daemon", f"--mps asks for a device-sharing daemon, but {platform.vendor} "
                                     f"({platform.device_type}) has none ddplab can start")
        return _Daemon(None, f"{platform.vendor} ({platform.device_type}) has no sharing daemon ddplab can use")
    if failure:
        daemon = _Daemon(None, f"the {name} daemon could not be used: {failure}", failed=True)
    elif opts.sharing_daemon == "off":
        daemon = _Daemon(None, f"--no-mps keeps the {name} daemon out")
    elif platform.sharing_daemon_running:
        daemon = _Daemon(RUNNING_DAEMON, f"the {name} daemon already running (not ddplab's) is used as it is "
                                         f"and left running")
    elif platform.sharing_daemon_control_path:
        daemon = _Daemon(PRIVATE_DAEMON, f"ddplab starts a private {name} daemon "
                                         f"({platform.sharing_daemon_control_path}) and stops it afterwards")
    else:
        daemon = _Daemon(None, f"no {name} daemon runs, and {control} is not on PATH to start one")
    if opts.sharing_daemon == "on" and daemon.kind is None:
        raise EnvironmentUnsupported("sharing-daemon-unavailable", f"--mps: {daemon.why}",
                                     hint="run without --mps to let ddplab choose a setup that works here")
    return daemon


def _decide_sharing(opts: LaunchOptions, platform: Platform) -> bool:
    devices = platform.device_count
    if opts.placement == "per-device":
        if opts.nproc > devices:
            raise UsageError(
                "per-device-too-many-ranks",
                f"--per-device with --nproc {opts.nproc} needs {opts.nproc} devices, but this machine has "
                f"{devices} {platform.device_type} device(s)",
                hint=f"use --share-device, or --nproc {devices} or fewer",
            )
        return False
    if opts.placement == "shared":
        return True
    return opts.nproc > devices


def _device_indices(opts: LaunchOptions, platform: Platform, shared: bool) -> tuple[int, ...]:
    if opts.placement == "spread":
        return tuple(i % platform.device_count for i in range(opts.nproc))
    return tuple(0 for _ in range(opts.nproc)) if shared else tuple(range(opts.nproc))


def _memory_fraction(opts: LaunchOptions, shared: bool, ranks: int) -> float | None:
    """Allocator cap per rank; ``ranks`` is the number of ranks on the busiest device."""
    if not shared:
        return opts.memory_fraction  # one rank per device: cap only if asked
    if opts.memory_fraction is None:
        return round((1.0 - opts.reserve) / ranks, 6)
    total = opts.memory_fraction * ranks
    if total > 1.0 + _EPS:
        raise UsageError(
            "memory-caps-exceed-device",
            f"--memory-fraction {opts.memory_fraction} x {ranks} ranks on one device = {total:.2f} of its "
            f"memory, which is more than 1",
            hint=f"use --memory-fraction {(1.0 - opts.reserve) / ranks:.3f} or less (default: (1 - reserve) / ranks)",
        )
    return opts.memory_fraction


def _choose_backend(opts: LaunchOptions, platform: Platform, shared: bool, daemon: _Daemon) -> _Choice:
    _check_backend_available(opts, platform)
    requested = opts.backend if opts.backend != "auto" else None
    insisted = daemon.kind if opts.sharing_daemon == "on" else None  # --mps: whatever the backend
    if not shared or platform.host_only:
        backend = requested or platform.backend
        where = "every rank on the host CPU" if platform.host_only else "one rank per device"
        reason = (f'requested with --backend ({where})' if requested else
                  f"{backend} is the {platform.vendor} backend for {platform.device_type} ({where})")
        return _single(backend, reason, insisted, platform)

    # Several ranks on one accelerator (on device 0, or on every device when spread).
    rule = platform.spec.multi_rank
    if requested and requested != platform.backend:
        return _single(requested, "requested with --backend; several ranks share a device", insisted, platform)
    if rule is None or rule.min_version is None:
        lib = platform.collective_library
        reason = (f"{platform.backend} is the {platform.vendor} backend; whether {lib} allows several ranks on "
                  f"one device is not documented, so ddplab runs it and reports what happens")
        return _single(platform.backend, reason, None, platform, warnings=(f"{lib} with several ranks per device "
                                                                            f"is unverified",))
    if (version_tuple(library_version(platform)[0]) or (0,)) >= rule.min_version:
        return _shared_with_library(opts, platform, daemon)
    return _shared_refused_by_library(opts, platform, daemon, insisted)


def _check_backend_available(opts: LaunchOptions, platform: Platform) -> None:
    if opts.backend != "auto":
        if not platform.backends_available.get(opts.backend):
            available = [b for b, ok in platform.backends_available.items() if ok]
            raise EnvironmentUnsupported(
                "backend-unavailable",
                f'backend "{opts.backend}" is not available on this machine; available: {", ".join(available)}',
            )
    elif not platform.backends_available.get(platform.backend):
        # The vendor's own backend is missing: nothing the user typed is wrong.
        raise EnvironmentUnsupported(
            "backend-missing",
            f'{platform.vendor} devices need backend "{platform.backend}", which this torch build lacks',
            hint="install the vendor's torch build or plug-in, or use --device cpu",
        )


def _single(backend: str, reason: str, daemon_kind: str | None, platform: Platform,
            warnings: tuple[str, ...] = ()) -> _Choice:
    """A choice with nothing to weigh: one option, chosen."""
    if daemon_kind:
        reason += f"; under the {platform.sharing_daemon} daemon (--mps)"
    option = Option(_setup(backend, daemon_kind, platform), backend, daemon_kind, True, reason)
    return _Choice(backend, reason, warnings=warnings, sharing_daemon=daemon_kind, considered=(option,))


def library_version(platform: Platform) -> tuple[str | None, str]:
    """The version of the collective library the ranks will load: the copy torch binds to, else the one it was built
    against; and which of the two it is, in words."""
    if platform.collective_loaded_version:
        return platform.collective_loaded_version, "loaded"
    return platform.collective_built_version, "built-in (loaded version unknown)"


def _shared_with_library(opts: LaunchOptions, platform: Platform, daemon: _Daemon) -> _Choice:
    """The library allows several ranks per device. Fastest first (docs/shared-device.md): the vendor
    backend with the sharing daemon, gloo, the vendor backend alone (only when asked: it time-slices)."""
    rule, vendor_backend = platform.spec.multi_rank, platform.backend
    lib, need, env_text = _library_terms(platform)
    allows = f"{lib} >= {need} allows several ranks on one device with {env_text} (ddplab sets it)"
    costs = rule.costs
    with_daemon = _setup(vendor_backend, daemon.kind, platform) if daemon.kind else \
        f"{vendor_backend} with {platform.sharing_daemon}"
    alone = f"{vendor_backend} without {platform.sharing_daemon} (time slicing)"
    slicing = (f"without the {platform.sharing_daemon} daemon the ranks time-slice the device and every "
               f"collective pays a context switch")
    time_slicing = f"{slicing}{_measured(costs, 'without_daemon_us')}"
    only_when_asked = f"{time_slicing}; used only when asked: --backend {vendor_backend} --no-mps"

    if daemon.kind:
        reason = f"{allows}, and {daemon.why}: the fastest setup{_comparison(costs)}"
        return _Choice(vendor_backend, reason, dict(rule.enable_env), sharing_daemon=daemon.kind, considered=(
            Option(with_daemon, vendor_backend, daemon.kind, True, reason),
            Option("gloo", "gloo", None, False, f"slower{_measured(costs, 'gloo_us')}"),
            Option(alone, vendor_backend, None, False, only_when_asked)))

    rejected = Option(with_daemon, vendor_backend, None, False, daemon.why)
    gloo_ok = bool(platform.backends_available.get("gloo"))
    if opts.backend == vendor_backend or not gloo_ok:
        asked = f"requested with --backend {vendor_backend}" if gloo_ok else "gloo is not available"
        reason = f"{asked}; {allows}; {daemon.why}; {time_slicing}"
        failed = (f"{daemon.why}; running {vendor_backend} without it",) if daemon.failed else ()
        return _Choice(vendor_backend, reason, dict(rule.enable_env), warnings=(*failed, time_slicing),
                       considered=(rejected, Option("gloo", "gloo", None, False, asked),
                                   Option(alone, vendor_backend, None, True, reason)))
    reason = f"{allows}, but {daemon.why}; {slicing}, so gloo is faster"
    reason += _measured(costs, "gloo_us", "without_daemon_us", note="; gloo stages device tensors through host memory")
    failed = (f"{daemon.why}; running gloo instead of {with_daemon}",) if daemon.failed else ()
    return _Choice("gloo", reason, warnings=failed, considered=(
        rejected, Option("gloo", "gloo", None, True, reason), Option(alone, vendor_backend, None, False,
                                                                      only_when_asked)))


def _shared_refused_by_library(opts: LaunchOptions, platform: Platform, daemon: _Daemon,
                               insisted: str | None) -> _Choice:
    """The library refuses several ranks per device: gloo, under the sharing daemon when one can be had
    (gloo's host staging is faster there too: docs/background.md §2), or the vendor backend when forced."""
    rule, vendor_backend = platform.spec.multi_rank, platform.backend
    lib, need, env_text = _library_terms(platform)
    refusal = f'{lib} refuses several ranks on one device ("{rule.refusal}"); it needs >= {need} with {env_text}'
    if opts.backend == vendor_backend:
        forced = _single(vendor_backend, f"forced with --backend although {refusal}", insisted, platform,
                         warnings=(f"expected to fail: {refusal}",))
        return replace(forced, expected_failure=refusal)
    if not platform.backends_available.get("gloo"):
        raise EnvironmentUnsupported("no-shared-device-backend", f"{refusal}, and gloo is not available either")
    reason = f"{refusal}; gloo works on device tensors by staging them through host memory (correct, slower)"
    refused = Option(vendor_backend, vendor_backend, None, False, refusal)
    if daemon.kind and opts.sharing_daemon != "off":
        costs = rule.costs
        faster = _measured(costs, "gloo_with_daemon_us", "gloo_us") if costs and costs.gloo_with_daemon_us else ""
        with_daemon = (f"{reason}; {daemon.why}: gloo is faster under the {platform.sharing_daemon} daemon, which "
                       f"spares the ranks a context switch per step{faster}")
        alone = Option("gloo", "gloo", None, False, f"slower without the {platform.sharing_daemon} daemon{faster}")
        return _Choice("gloo", with_daemon, sharing_daemon=daemon.kind, considered=(
            refused, Option(_setup("gloo", daemon.kind, platform), "gloo", daemon.kind, True, with_daemon), alone))
    if daemon.failed:
        reason += f"; {daemon.why}"
    gloo = _single("gloo", reason, None, platform,
                   warnings=(f"{daemon.why}; running gloo without it",) if daemon.failed else ())
    return replace(gloo, considered=(refused, *gloo.considered))


def _library_terms(platform: Platform) -> tuple[str, str, str]:
    """("<library> <version> (loaded)", the version several ranks per device need, the variables that allow it)."""
    rule = platform.spec.multi_rank
    version, which = library_version(platform)
    return f"{platform.collective_library} {version} ({which})", rule.version_needed, rule.switch


def _setup(backend: str, daemon_kind: str | None, platform: Platform) -> str:
    if daemon_kind == PRIVATE_DAEMON:
        return f"{backend} with {platform.sharing_daemon} (a private daemon, started and stopped by ddplab)"
    if daemon_kind == RUNNING_DAEMON:
        return f"{backend} with {platform.sharing_daemon} (the daemon already running)"
    return backend


def _us(value: float) -> str:
    return f"{value:,.1f}".removesuffix(".0") + " us"


def _measured(costs: SharedDeviceCosts | None, *setups: str, note: str = "") -> str:
    """" (4,501.7 us per op, measured on ...)" for one setup, " (A us vs B us per op, ...)" for two, or nothing where
    the vendor has no measurement."""
    if costs is None:
        return ""
    return f" ({' vs '.join(_us(getattr(costs, s)) for s in setups)} per op, measured on {costs.measured_on}{note})"


def _comparison(costs: SharedDeviceCosts | None) -> str:
    if costs is None:
        return ""
    return (f" ({_us(costs.with_daemon_us)} per op vs gloo {_us(costs.gloo_us)} and "
            f"{_us(costs.without_daemon_us)} without the daemon, measured on {costs.measured_on})")


def require_fits(platform: Platform, placement: Placement, bytes_per_rank: int, what: str, reference: str,
                 hint: str) -> None:
    """Refuse, before any rank starts, buffers that the memory the ranks run on cannot hold: the host's available
    memory, or a device's free memory shared by its ranks, each held to its cap. A size not read is not judged."""
    indices = placement.device_indices
    for index in sorted(set(indices)):
        device = platform.devices[0 if placement.host_only else index] if platform.devices else None
        if device is None or device.free_bytes is None:
            continue
        ranks = len(indices) if placement.host_only else indices.count(index)
        need = bytes_per_rank * ranks
        where = "in host memory" if placement.host_only else f"on device {index} ({device.name})"
        if need > device.free_bytes:
            raise UsageError(reference, f"{what} needs about {human_bytes(need)} {where} ({ranks} rank(s) x "
                                        f"{human_bytes(bytes_per_rank)}), but only {human_bytes(device.free_bytes)} "
                                        f"is free", hint=hint)
        cap = placement.memory_fraction * device.total_bytes if (
            placement.memory_fraction_enforced and device.total_bytes) else None
        if cap is not None and bytes_per_rank > cap:
            raise UsageError(reference, f"{what} needs about {human_bytes(bytes_per_rank)} per rank, more than each "
                                        f"rank's cap {where}: {human_bytes(int(cap))} ({placement.memory_fraction} of "
                                        f"{human_bytes(device.total_bytes)})", hint=hint)
