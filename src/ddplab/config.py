"""Run configurations: frozen dataclasses validated on construction.

Validation here is pure (no probing, no I/O): ranges and names. Checks that need
the machine (is this backend available? are there enough devices?) live in
``policy.py``. Both raise ``UsageError`` before any process starts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .errors import UsageError, invalid_choice
from .platform.vendors import KNOWN_BACKENDS, VENDORS

# More ranks than this on one node is almost certainly a typo (e.g. 1000 for 10).
MAX_NPROC = 64
MAX_STEPS = 1_000_000
MAX_NODES = 1024
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

    def __post_init__(self):
        _require(isinstance(self.nproc, int) and 1 <= self.nproc <= MAX_NPROC, "invalid-nproc",
                 f"--nproc {self.nproc} is out of range; valid: 1 to {MAX_NPROC} ranks per node")
        if self.placement not in PLACEMENTS:
            raise invalid_choice("placement", self.placement, PLACEMENTS)
        if self.backend not in ("auto", *KNOWN_BACKENDS):
            raise invalid_choice("backend", self.backend, ("auto", *KNOWN_BACKENDS))
        if self.device not in ("auto", *VENDORS):
            raise invalid_choice("device", self.device, ("auto", *VENDORS))
        if self.sharing_daemon not in SHARING_DAEMON_MODES:
            raise invalid_choice("sharing_daemon", self.sharing_daemon, SHARING_DAEMON_MODES)
        if self.memory_fraction is not None:
            _require(0.0 < self.memory_fraction <= 1.0, "invalid-memory-fraction",
                     f"--memory-fraction {self.memory_fraction} is out of range; valid: 0 < fraction <= 1")
        _require(0.0 <= self.reserve < 1.0, "invalid-reserve",
                 f"--reserve {self.reserve} is out of range; valid: 0 <= reserve < 1")
        _require(self.timeout_s > 0, "invalid-timeout",
                 f"--timeout {self.timeout_s} must be a positive number of seconds")
        _require(isinstance(self.nnodes, int) and 1 <= self.nnodes <= MAX_NODES, "invalid-nnodes",
                 f"--nnodes {self.nnodes} is out of range; valid: 1 to {MAX_NODES}")
        _require(self.nnodes == 1 or bool(self.rdzv_endpoint), "rdzv-endpoint-required",
                 f"--nnodes {self.nnodes} needs --rdzv-endpoint HOST:PORT, the same on every machine")
        _require(self.rdzv_endpoint is None or _is_endpoint(self.rdzv_endpoint), "invalid-rdzv-endpoint",
                 f'--rdzv-endpoint "{self.rdzv_endpoint}" is not HOST:PORT (port 1-65535), e.g. node0:29400')
        _require(self.hang_timeout_s is None or self.hang_timeout_s > 0, "invalid-hang-timeout",
                 f"--hang-timeout {self.hang_timeout_s} must be a positive number of seconds")

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
        _require(isinstance(self.steps, int) and 1 <= self.steps <= MAX_STEPS, "invalid-steps",
                 f"--steps {self.steps} is out of range; valid: 1 to {MAX_STEPS}")
        if self.model not in MODELS:
            raise invalid_choice("model", self.model, MODELS)
        _require(self.batch_size >= 1, "invalid-batch-size", f"--batch-size {self.batch_size} must be >= 1")
        _require(self.check_every >= 1, "invalid-check-every", f"--check-every {self.check_every} must be >= 1")

    def to_dict(self) -> dict:
        return asdict(self)
