"""Run configurations: frozen dataclasses validated on construction.

Validation here is pure (no probing, no I/O): ranges and names. Checks that need
the machine (is this backend available? are there enough devices?) live in
``policy.py``. Both raise ``UsageError`` before any process starts.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from .cluster.endpoint import HOST_CHOICES as RDZV_HOST_CHOICES
from .errors import UsageError, invalid_choice
from .platform.vendors import KNOWN_BACKENDS, VENDORS

# More ranks than this on one node is almost certainly a typo (e.g. 1000 for 10).
MAX_NPROC = 64
MAX_STEPS = 1_000_000
MAX_NODES = 1024
# A timeout longer than a day is a typo (or inf, which torch turns into an OverflowError in every rank).
MAX_TIMEOUT_S = 86_400.0
# Samples per rank per step: every rank also rebuilds all ranks' batches for the reference gradient.
MAX_BATCH_SIZE = 1 << 20
MAX_SEED = 2**32 - 1  # the batch generator's seed is seed * 1_000_003 + ..., which must stay below 2**64
PLACEMENTS = ("auto", "shared", "per-device", "spread")
SHARING_DAEMON_MODES = ("auto", "on", "off")
MODELS = ("linear", "mlp")
DEFAULT_RESERVE = 0.10  # device memory left for contexts and communicator buffers


def _is_endpoint(text: str) -> bool:
    host, sep, port = text.rpartition(":")
    return bool(sep and host and port.isdigit() and 1 <= int(port) <= 65535)


def _require(ok: bool, reference: str, message: str) -> None:
    if not ok:
        raise UsageError(reference, message)


def check_number(value, flag: str, low: float, high: float, *, integer: bool = False, name: str | None = None,
                 low_open: bool = False, high_open: bool = False, unit: str = "", reference: str | None = None) -> None:
    """The one check every numeric option goes through: a finite number inside its range.

    argparse's float() accepts "nan", "inf" and "1e15"; each would start ranks that crash
    (a timedelta of inf seconds) or run forever, so they are refused here, before anything
    starts. ``name`` shows the range as a comparison ("0 < seconds <= 86400"), needed when
    an end is open; without it the range reads "1 to 64".
    """
    reference = reference or f"invalid-{flag.lstrip('-')}"
    if name or low_open or high_open:
        valid = (f"{_number_text(low)} {'<' if low_open else '<='} {name or 'value'} "
                 f"{'<' if high_open else '<='} {_number_text(high)}{unit}")
    else:
        valid = f"{_number_text(low)} to {_number_text(high)}{unit}"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        kind = "a whole number" if integer else "a number"
        raise UsageError(reference, f"{flag} {value!r} is not {kind}; valid: {valid}")
    if isinstance(value, float) and not math.isfinite(value):
        raise UsageError(reference, f"{flag} {value} is not a finite number; valid: {valid}")
    too_low = value <= low if low_open else value < low
    too_high = value >= high if high_open else value > high
    if too_low or too_high:
        raise UsageError(reference, f"{flag} {value} is out of range; valid: {valid}")


def _number_text(x: float) -> str:
    """A range end as people write it: 1048576, not 1.04858e+06."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


@dataclass(frozen=True, kw_only=True)
class LaunchOptions:
    """Where and how ranks start. Shared by every multi-rank command."""

    nproc: int = 2
    """Ranks on this node."""
    placement: str = "auto"
    """shared: every rank on device 0; per-device: rank i on device i; spread: rank i on device i mod
    devices (several ranks per device on every device); auto: shared when nproc > devices."""
    backend: str = "auto"
    """Collective backend, or auto to let the placement policy choose."""
    device: str = "auto"
    """Device type, or auto for the detected accelerator (cpu when none)."""
    memory_fraction: float | None = None
    """Allocator cap per rank on a shared device; default (1 - reserve) / ranks on the device."""
    reserve: float = DEFAULT_RESERVE
    timeout_s: float = 120.0
    """Process-group timeout passed to init_process_group."""
    run_dir: str | None = None
    """Directory for this run's logs and results; default ./ddplab-runs/<run id>."""
    sharing_daemon: str = "auto"
    """Device-sharing daemon (MPS): auto = use one when several ranks share a device and the library allows
    it (a running one as it is, else a private one started and stopped for this run); on = insist (--mps);
    off = never (--no-mps)."""
    hang_timeout_s: float | None = None
    """ddplab's supervisor declares a hang when no rank progresses this long; None: off."""
    nnodes: int = 1
    """Machines in the job; each runs ddplab with the same --rdzv-endpoint (torch's c10d rendezvous)."""
    rdzv_endpoint: str | None = None
    """host:port of the c10d rendezvous store; default 127.0.0.1 with a free port (one machine)."""
    rdzv_host: str = "auto"
    """Several machines: does this one host the store? auto = when the endpoint is one of its interface
    addresses; yes / no decide (torch's is_host rendezvous setting)."""

    def __post_init__(self):
        check_number(self.nproc, "--nproc", 1, MAX_NPROC, integer=True, unit=" ranks per node")
        if self.placement not in PLACEMENTS:
            raise invalid_choice("placement", self.placement, PLACEMENTS)
        if self.backend not in ("auto", *KNOWN_BACKENDS):
            raise invalid_choice("backend", self.backend, ("auto", *KNOWN_BACKENDS))
        if self.device not in ("auto", *VENDORS):
            raise invalid_choice("device", self.device, ("auto", *VENDORS))
        if self.sharing_daemon not in SHARING_DAEMON_MODES:
            raise invalid_choice("sharing_daemon", self.sharing_daemon, SHARING_DAEMON_MODES)
        if self.memory_fraction is not None:
            check_number(self.memory_fraction, "--memory-fraction", 0, 1, name="fraction", low_open=True)
        check_number(self.reserve, "--reserve", 0, 1, name="reserve", high_open=True)
        check_number(self.timeout_s, "--timeout", 0, MAX_TIMEOUT_S, name="seconds", low_open=True)
        check_number(self.nnodes, "--nnodes", 1, MAX_NODES, integer=True)
        _require(self.nnodes == 1 or bool(self.rdzv_endpoint), "rdzv-endpoint-required",
                 f"--nnodes {self.nnodes} needs --rdzv-endpoint HOST:PORT, the same on every machine")
        _require(self.rdzv_endpoint is None or _is_endpoint(self.rdzv_endpoint), "invalid-rdzv-endpoint",
                 f'--rdzv-endpoint "{self.rdzv_endpoint}" is not HOST:PORT (port 1-65535), e.g. node0:29400')
        if self.rdzv_host not in RDZV_HOST_CHOICES:
            raise invalid_choice("rdzv_host", self.rdzv_host, RDZV_HOST_CHOICES)
        if self.hang_timeout_s is not None:
            check_number(self.hang_timeout_s, "--hang-timeout", 0, MAX_TIMEOUT_S, name="seconds", low_open=True)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """The report's DDP experiment."""

    launch: LaunchOptions
    steps: int = 20
    """Optimizer steps per rank."""
    model: str = "linear"
    """linear: the report's nn.Linear(10, 10); mlp: ~4.2 M parameters, a non-trivial all_reduce."""
    batch_size: int = 20
    """Samples per rank per step (the report uses 20)."""
    seed: int = 0
    check_every: int = 1
    """Compare gradients with the single-process reference every N steps (first and last always)."""

    def __post_init__(self):
        check_number(self.steps, "--steps", 1, MAX_STEPS, integer=True)
        if self.model not in MODELS:
            raise invalid_choice("model", self.model, MODELS)
        check_number(self.batch_size, "--batch-size", 1, MAX_BATCH_SIZE, integer=True)
        check_number(self.seed, "--seed", 0, MAX_SEED, integer=True)
        check_number(self.check_every, "--check-every", 1, MAX_STEPS, integer=True)

    def to_dict(self) -> dict:
        return asdict(self)
