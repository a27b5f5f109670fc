"""Placement policy: which device each rank uses, its memory cap, and the backend.

Pure decisions over a ``Platform`` and ``LaunchOptions``; no probing here, so every
vendor's branch is unit-tested with hand-made platforms. Every choice carries its
reason in words, because "why gloo and not NCCL?" is the user's first question.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .config import LaunchOptions
from .errors import EnvironmentUnsupported, UsageError
from .platform import Platform
from .platform.collective_lib import version_tuple

# Device-sharing daemon absent: measured on 1x H200, NCCL 2.30.7, 2 ranks, 4-byte all_reduce.
NO_DAEMON_COST = "measured on H200: 4,501 us per 4-byte all_reduce without MPS vs 45 us with it"
_EPS = 1e-9


@dataclass(frozen=True)
class Placement:
    shared_device: bool
    device_type: str
    device_indices: tuple[int, ...]  # device index of each local rank
    memory_fraction: float | None  # allocator cap per rank; None = no cap
    memory_fraction_enforced: bool  # False on the host, where there is no device allocator
    backend: str
    backend_reason: str
    env: dict[str, str] = field(default_factory=dict)  # set in every rank before init
    warnings: tuple[str, ...] = ()
    expected_failure: str | None = None  # what the library will refuse, when the user forced it
    host_only: bool = False  # ranks run on the host CPU (no device index)

    def device_label(self, local_rank: int) -> str:
        """How torch names the rank's device: "cpu" or "<type>:<index>"."""
        return self.device_type if self.host_only else f"{self.device_type}:{self.device_indices[local_rank]}"

    def to_dict(self) -> dict:
        return asdict(self)


def plan(opts: LaunchOptions, platform: Platform) -> Placement:
    if opts.sharing_daemon and not platform.spec.sharing_daemon_control:
        raise EnvironmentUnsupported(
            "no-sharing-daemon",
            f"--mps asks for a device-sharing daemon, but {platform.vendor} ({platform.device_type}) has none "
            f"ddplab can start")
    shared = _decide_sharing(opts, platform)
    indices = _device_indices(opts, platform, shared)
    per_device = max(indices.count(i) for i in set(indices))
    shared = per_device > 1
    fraction = _memory_fraction(opts, shared, per_device)
    backend, reason, env, warnings, expected = _choose_backend(opts, platform, shared)
    return Placement(
        shared_device=shared,
        device_type=platform.device_type,
        device_indices=indices,
        memory_fraction=fraction,
        memory_fraction_enforced=fraction is not None and not platform.is_host_only,
        backend=backend,
        backend_reason=reason,
        env=env,
        warnings=tuple(warnings),
        expected_failure=expected,
        host_only=platform.is_host_only,
    )


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


def _choose_backend(opts: LaunchOptions, platform: Platform, shared: bool):
    """Returns (backend, reason, env, warnings, expected_failure)."""
    vendor = platform.spec
    lib = platform.collective_library
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

    requested = opts.backend if opts.backend != "auto" else None
    if not shared or platform.is_host_only:
        backend = requested or platform.backend
        where = "every rank on the host CPU" if platform.is_host_only else "one rank per device"
        reason = (f'requested with --backend ({where})' if requested else
                  f"{backend} is the {platform.vendor} backend for {platform.device_type} ({where})")
        return backend, reason, {}, [], None

    # Several ranks on one accelerator (on device 0, or on every device when spread).
    rule = vendor.multi_rank
    if requested and requested != platform.backend:
        return requested, "requested with --backend; several ranks share a device", {}, [], None

    if rule is None or rule.min_version is None:
        reason = (f"{platform.backend} is the {platform.vendor} backend; whether {lib} allows several ranks on "
                  f"one device is not documented, so ddplab runs it and reports what happens")
        return platform.backend, reason, {}, [f"{lib} with several ranks per device is unverified"], None

    version = platform.collective_loaded_version or platform.collective_built_version
    which = "loaded" if platform.collective_loaded_version else "built-in (loaded version unknown)"
    need = ".".join(str(p) for p in rule.min_version)
    allowed = (version_tuple(version) or (0,)) >= rule.min_version
    env_text = " ".join(f"{k}={v}" for k, v in rule.enable_env.items())

    if allowed:
        reason = (f"{lib} {version} ({which}) >= {need} allows several ranks on one device with {env_text}; "
                  f"ddplab sets it")
        warnings = []
        if rule.sharing_daemon and not (platform.sharing_daemon_running or opts.sharing_daemon):
            warnings.append(f"no {rule.sharing_daemon} daemon is running: ranks time-slice the device and every "
                            f"collective pays a context switch ({NO_DAEMON_COST})")
        return platform.backend, reason, dict(rule.enable_env), warnings, None

    refusal = (f'{lib} {version} ({which}) refuses several ranks on one device ("{rule.refusal}"); '
               f"it needs >= {need} with {env_text}")
    if requested:
        return (platform.backend, f"forced with --backend although {refusal}", {},
                [f"expected to fail: {refusal}"], refusal)
    if not platform.backends_available.get("gloo"):
        raise EnvironmentUnsupported("no-shared-device-backend", f"{refusal}, and gloo is not available either")
    reason = f"{refusal}; gloo works on device tensors by staging them through host memory (correct, slower)"
    return "gloo", reason, {}, [], None
