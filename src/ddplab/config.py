"""Run configurations: frozen dataclasses validated on construction, one per measurement.

Validation here is pure (no probing, no I/O): ranges and names. Checks that need
the machine (is this backend available? are there enough devices?) live in
``policy.py`` and in each measurement's ``run`` before it starts anything. Both raise
``UsageError`` before any process starts.

Each Config also knows its command line (``to_argv``): the lab writes it beside every stage, so a
stage can be reproduced alone, and a test parses it back with the command's own parser. A field
says how it is spelt on the command line in its metadata: ``flag`` (an option with a value),
``switch`` (an option that sets True/False), ``choices`` (a value that maps to its own option).
"""

from __future__ import annotations

import math
from dataclasses import MISSING, asdict, dataclass, field, fields, replace

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

    nproc: int = field(default=2, metadata={"flag": "--nproc"})
    """Ranks on this node."""
    placement: str = field(default="auto", metadata={"choices": {"shared": "--share-device", "per-device": "--per-device",
                                                                "spread": "--spread"}})
    """shared: every rank on device 0; per-device: rank i on device i; spread: rank i on device i mod
    devices (several ranks per device on every device); auto: shared when nproc > devices."""
    backend: str = field(default="auto", metadata={"flag": "--backend"})
    """Collective backend, or auto to let the placement policy choose."""
    device: str = field(default="auto", metadata={"flag": "--device"})
    """Device type, or auto for the detected accelerator (cpu when none)."""
    memory_fraction: float | None = field(default=None, metadata={"flag": "--memory-fraction"})
    """Allocator cap per rank on a shared device; default (1 - reserve) / ranks on the device."""
    reserve: float = field(default=DEFAULT_RESERVE, metadata={"flag": "--reserve"})
    timeout_s: float = field(default=120.0, metadata={"flag": "--timeout"})
    """Process-group timeout passed to init_process_group."""
    run_dir: str | None = field(default=None, metadata={"flag": "--run-dir"})
    """Directory for this run's logs and results; default ./ddplab-runs/<run id>."""
    sharing_daemon: str = field(default="auto", metadata={"choices": {"on": "--mps", "off": "--no-mps"}})
    """Device-sharing daemon (MPS): auto = use one when several ranks share a device and the library allows
    it (a running one as it is, else a private one started and stopped for this run); on = insist (--mps);
    off = never (--no-mps)."""
    hang_timeout_s: float | None = field(default=None, metadata={"flag": "--hang-timeout"})
    """ddplab's supervisor declares a hang when no rank progresses this long; None: off."""
    nnodes: int = field(default=1, metadata={"flag": "--nnodes"})
    """Machines in the job; each runs ddplab with the same --rdzv-endpoint (torch's c10d rendezvous)."""
    rdzv_endpoint: str | None = field(default=None, metadata={"flag": "--rdzv-endpoint"})
    """host:port of the c10d rendezvous store; default 127.0.0.1 with a free port (one machine)."""

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
        if self.hang_timeout_s is not None:
            check_number(self.hang_timeout_s, "--hang-timeout", 0, MAX_TIMEOUT_S, name="seconds", low_open=True)

    def to_dict(self) -> dict:
        return asdict(self)

    def to_argv(self) -> list[str]:
        return argv_of(self)


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """The report's DDP experiment."""

    launch: LaunchOptions = field(default_factory=LaunchOptions)
    steps: int = field(default=20, metadata={"flag": "--steps"})
    """Optimizer steps per rank."""
    model: str = field(default="linear", metadata={"flag": "--model"})
    """linear: the report's nn.Linear(10, 10); mlp: ~4.2 M parameters, a non-trivial all_reduce."""
    batch_size: int = field(default=20, metadata={"flag": "--batch-size"})
    """Samples per rank per step (the report uses 20)."""
    seed: int = field(default=0, metadata={"flag": "--seed"})
    check_every: int = field(default=1, metadata={"flag": "--check-every"})
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

    def to_argv(self) -> list[str]:
        return argv_of(self)


STORM_MAX_ITERS = 10_000_000
STORM_MAX_BYTES = 1 << 30
STORM_MAX_THRESHOLD_US = 60e6  # a minute per 4-byte all_reduce is no threshold at all


@dataclass(frozen=True, kw_only=True)
class StormConfig:
    """The report's latency storm: N tiny all_reduces."""

    launch: LaunchOptions = field(default_factory=LaunchOptions, metadata={"flatten": True})
    iters: int = field(default=10_000, metadata={"flag": "--iters"})
    """all_reduces in the storm."""
    bytes: int = field(default=4, metadata={"flag": "--bytes"})
    """Bytes per all_reduce."""
    warmup: int = field(init=False, default=0)
    """Untimed all_reduces first: min(100, iters)."""
    per_op_iters: int = field(init=False, default=0)
    """Ops in the blocking per-op pass: min(iters, 2000)."""
    threshold_us: float | None = field(default=None, metadata={"flag": "--threshold-us"})
    """Fail above this mean latency; None: chosen per setup."""
    sample: bool = field(default=True, metadata={"switch": ("", "--no-sample")})
    """Sample the ranks while the storm runs (off: to measure the sampler's own cost)."""

    def __post_init__(self):
        check_number(self.iters, "--iters", 1, STORM_MAX_ITERS, integer=True)
        check_number(self.bytes, "--bytes", 1, STORM_MAX_BYTES, integer=True)
        if self.threshold_us is not None:
            check_number(self.threshold_us, "--threshold-us", 0, STORM_MAX_THRESHOLD_US, name="us", low_open=True,
                         reference="invalid-threshold")
        object.__setattr__(self, "warmup", min(100, self.iters))
        object.__setattr__(self, "per_op_iters", min(self.iters, 2000))

    def to_argv(self) -> list[str]:
        return argv_of(self)


DRILL_LAUNCHERS = ("ddplab", "torchrun")
DRILL_TIMEOUT_S = 10.0


@dataclass(frozen=True, kw_only=True)
class DrillConfig:
    """Fault drills: which ones, the victim, and where their ranks start.

    ``--timeout`` is both the process-group timeout and ddplab's hang timeout, because every drill is judged
    against it (detected within timeout + 5 s); ``--hang-timeout`` can only make the supervisor quicker.
    """

    launch: LaunchOptions = field(default_factory=lambda: LaunchOptions(timeout_s=DRILL_TIMEOUT_S),
                                  metadata={"flatten": True})
    drills: tuple[str, ...]
    """Drill names in the order they run (kill-rank and kill_rank both accepted; stored as kill_rank)."""
    victim: int | None = field(default=None, metadata={"flag": "--victim"})
    """GLOBAL rank the fault goes into; None: the last rank of the job (nproc x nnodes - 1)."""
    launcher: str = field(default="ddplab", metadata={"flag": "--launcher"})
    """kill_launcher only: ddplab, or plain torchrun for comparison."""

    def __post_init__(self):
        from .drills import canonical

        _require(bool(self.drills), "invalid-drill", "no drill named: give one of the drills, 'short' or 'all'")
        object.__setattr__(self, "drills", tuple(canonical(name) for name in self.drills))
        launch = self.launch
        world = launch.nproc * launch.nnodes
        job = f"--nproc {launch.nproc}" + (f" x --nnodes {launch.nnodes}" if launch.nnodes > 1 else "")
        _require(world >= 2, "drill-needs-ranks", f"{job}: a drill needs at least 2 ranks")
        victim = world - 1 if self.victim is None else self.victim
        _require(isinstance(victim, int) and not isinstance(victim, bool) and 0 <= victim < world, "invalid-victim",
                 f"--victim {victim} is not a rank of {job} (valid: 0 to {world - 1})")
        object.__setattr__(self, "victim", victim)
        if self.launcher not in DRILL_LAUNCHERS:
            raise invalid_choice("launcher", self.launcher, DRILL_LAUNCHERS)
        hang = launch.timeout_s if launch.hang_timeout_s is None else min(launch.timeout_s, launch.hang_timeout_s)
        object.__setattr__(self, "launch", replace(launch, hang_timeout_s=hang))

    def to_argv(self) -> list[str]:
        return [",".join(self.drills), *argv_of(self)]


def argv_of(config) -> list[str]:
    """The command-line options that give ``config`` back (defaults left out), from its fields' metadata."""
    out: list[str] = []
    for f in fields(config):
        value = getattr(config, f.name)
        if hasattr(value, "to_argv") and f.name == "launch":
            out += value.to_argv()
            continue
        meta = f.metadata
        default = f.default if f.default is not MISSING else (
            f.default_factory() if f.default_factory is not MISSING else MISSING)
        if value == default or not (meta.get("flag") or meta.get("switch") or meta.get("choices")):
            continue
        if "choices" in meta:
            out.append(meta["choices"][value])
        elif "switch" in meta:
            on, off = meta["switch"]
            out.append(on if value else off)
        else:
            out += [meta["flag"], _argv_text(value)]
    return out


def _argv_text(value) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return _number_text(value) if isinstance(value, float) else str(value)
