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
import re
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from typing import Any

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
STARTED_BY = ("torchrun",)  # who starts the ranks when not ddplab's own launcher (LaunchOptions.started_by)
SHARING_DAEMON_MODES = ("auto", "on", "off")
MODELS = ("linear", "mlp")
DEFAULT_RESERVE = 0.10  # device memory left for contexts and communicator buffers
# What a storm or a sweep times the collective through (issue 14): torch.distributed (the report's own method),
# the collective library alone through the vendor's binding (platform/library_binding.py), or both side by side.
ENGINES = ("torch", "library", "both")
# The engine field: written into a report only when it is not torch, so a torch report keeps its keys.
ENGINE_FIELD = {"flag": "--engine", "omit_default": True}


def _is_endpoint(text: str) -> bool:
    host, sep, port = text.rpartition(":")
    return bool(sep and host and port.isdigit() and 1 <= int(port) <= 65535)


def _check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise invalid_choice("engine", engine, ENGINES)


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


def check_nproc(value, flag: str = "--nproc") -> None:
    """The one rule for how many ranks one node may start (train, run, every multi-rank command and `ddplab
    launch`'s --nproc-per-node): a whole number from 1 to MAX_NPROC, refused before any process starts."""
    check_number(value, flag, 1, MAX_NPROC, integer=True, unit=" ranks per node",
                 reference=f"invalid-{flag.lstrip('-')}")


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
    rdzv_id: str | None = field(default=None, metadata={"flag": "--rdzv-id", "omit_none": True})
    """Several machines: the job's name, the same on every machine, new for every launch on one endpoint
    (torchrun's --rdzv-id); None: derived from the endpoint. Drills derive one per session from it."""
    rdzv_host: str = field(default="auto", metadata={"flag": "--rdzv-host"})
    """Several machines: does this one host the store? auto = when the endpoint is one of its interface
    addresses; yes / no decide (torch's is_host rendezvous setting)."""
    started_by: str | None = field(default=None, metadata={"omit_none": True})
    """Who starts the ranks: None, ddplab's own launcher (through elastic); "torchrun": ddplab was started as
    each of torchrun's workers, and this process is one rank (commands/options.py reads it from the
    environment). Absent from the JSON config unless torchrun."""

    def __post_init__(self):
        check_nproc(self.nproc)
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
        _require(self.nnodes == 1 or bool(self.rdzv_endpoint) or self.started_by is not None, "rdzv-endpoint-required",
                 f"--nnodes {self.nnodes} needs --rdzv-endpoint HOST:PORT, the same on every machine")
        _require(self.rdzv_endpoint is None or _is_endpoint(self.rdzv_endpoint), "invalid-rdzv-endpoint",
                 f'--rdzv-endpoint "{self.rdzv_endpoint}" is not HOST:PORT (port 1-65535), e.g. node0:29400')
        _require(self.rdzv_id is None or bool(re.fullmatch(r"[A-Za-z0-9_.:-]{1,128}", self.rdzv_id)),
                 "invalid-rdzv-id", f'--rdzv-id "{self.rdzv_id}": 1 to 128 letters, digits, "_", ".", ":", "-"')
        if self.rdzv_host not in RDZV_HOST_CHOICES:
            raise invalid_choice("rdzv_host", self.rdzv_host, RDZV_HOST_CHOICES)
        if self.started_by is not None and self.started_by not in STARTED_BY:
            raise invalid_choice("started_by", self.started_by, STARTED_BY)
        if self.started_by == "torchrun":  # this process is one rank: nothing of ddplab's launcher is here
            _require(self.hang_timeout_s is None, "not-under-torchrun",
                     "--hang-timeout: ddplab's supervisor lives in its own launcher, and torchrun is the launcher here")
            _require(self.sharing_daemon != "on", "not-under-torchrun",
                     "--mps: the sharing daemon is started by ddplab's launcher, and torchrun is the launcher here")
            object.__setattr__(self, "sharing_daemon", "off")  # auto: none can be started by one rank for all
        if self.hang_timeout_s is not None:
            check_number(self.hang_timeout_s, "--hang-timeout", 0, MAX_TIMEOUT_S, name="seconds", low_open=True)

    def to_dict(self) -> dict:
        return asdict(self)

    def to_argv(self) -> list[str]:
        return argv_of(self)

    @staticmethod
    def json_upgrade(data: dict) -> dict:
        """Reports before the three-valued daemon option wrote --mps as a boolean."""
        if isinstance(data.get("sharing_daemon"), bool):
            return {**data, "sharing_daemon": "on" if data["sharing_daemon"] else "auto"}
        return data


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
    engine: str = field(default="torch", metadata=ENGINE_FIELD)
    """torch, library (the collective library called directly on the same buffers) or both, side by side."""

    def __post_init__(self):
        _check_engine(self.engine)
        check_number(self.iters, "--iters", 1, STORM_MAX_ITERS, integer=True)
        check_number(self.bytes, "--bytes", 1, STORM_MAX_BYTES, integer=True)
        if self.threshold_us is not None:
            check_number(self.threshold_us, "--threshold-us", 0, STORM_MAX_THRESHOLD_US, name="us", low_open=True,
                         reference="invalid-threshold")
        object.__setattr__(self, "warmup", min(100, self.iters))
        object.__setattr__(self, "per_op_iters", min(self.iters, 2000))

    def to_argv(self) -> list[str]:
        return argv_of(self)


CEILING_MAX_ITERS = 10_000
MAX_SIZE_BYTES = 1 << 50  # a pebibyte: no device or host holds one buffer that large (sizes.py uses it too)


@dataclass(frozen=True, kw_only=True)
class CeilingConfig:
    """The loopback ceiling: one rank on device 0 copies memory (the report's section 3.2)."""

    device: str = field(default="auto", metadata={"flag": "--device"})
    """Device type, or auto for the detected accelerator (cpu when none)."""
    run_dir: str | None = field(default=None, metadata={"flag": "--run-dir"})
    bytes: int = field(default=1 << 30, metadata={"flag": "--bytes"})
    """Bytes per device copy."""
    host_bytes: int = field(default=256 << 20, metadata={"flag": "--host-bytes"})
    """Bytes per host<->device copy."""
    iters: int = field(default=20, metadata={"flag": "--iters"})
    """Timed copies per path; the median is reported."""
    launch: LaunchOptions = field(init=False, default=None, metadata={"flatten": True})
    """Derived: always one rank on device 0 (its keys sit beside the others in the JSON config)."""

    def __post_init__(self):
        check_number(self.bytes, "--bytes", 1, MAX_SIZE_BYTES, integer=True, unit=" bytes")
        check_number(self.host_bytes, "--host-bytes", 1, MAX_SIZE_BYTES, integer=True, unit=" bytes")
        check_number(self.iters, "--iters", 1, CEILING_MAX_ITERS, integer=True)
        object.__setattr__(self, "launch", LaunchOptions(nproc=1, placement="per-device", device=self.device,
                                                         run_dir=self.run_dir))

    def to_argv(self) -> list[str]:
        return argv_of(self)


CONTENTION_MIN_SIZE, CONTENTION_MAX_SIZE = 16, 65536
CONTENTION_MIN_SECONDS, CONTENTION_MAX_SECONDS = 0.1, 600.0


@dataclass(frozen=True, kw_only=True)
class ContentionConfig:
    """K processes computing on one device vs one alone (the report's section 3.2).

    The ranks always share one device, and the sharing daemon is off unless asked for (--mps): time
    slicing is what contention measures, so unlike other commands it never takes the daemon by default.
    """

    launch: LaunchOptions = field(default_factory=LaunchOptions, metadata={"flatten": True})
    size: int | None = field(default=None, metadata={"flag": "--size"})
    """Matrix dimension; None: 8192 on an accelerator, 512 on the host (chosen once the device is known)."""
    seconds: float = field(default=3.0, metadata={"flag": "--seconds"})
    """Measurement window of each phase."""
    batch: int | None = field(init=False, default=None)
    """Matmuls between device synchronisations: 20 on an accelerator, 4 on the host, chosen with the
    device like ``size``; kept in the JSON config, where reports before issue 11 wrote the chosen value."""

    def __post_init__(self):
        if self.launch.placement == "per-device":
            raise UsageError("contention-needs-shared-device",
                             "contention measures processes sharing one device; --per-device does not apply")
        daemon = "off" if self.launch.sharing_daemon == "auto" else self.launch.sharing_daemon
        object.__setattr__(self, "launch", replace(self.launch, placement="shared", sharing_daemon=daemon))
        if self.size is not None:
            check_number(self.size, "--size", CONTENTION_MIN_SIZE, CONTENTION_MAX_SIZE, integer=True)
        check_number(self.seconds, "--seconds", CONTENTION_MIN_SECONDS, CONTENTION_MAX_SECONDS)

    def to_argv(self) -> list[str]:
        return argv_of(self)
SWEEP_MAX_ITERS = 100_000
SWEEP_MAX_REPEAT = 100
SWEEP_MAX_BUSBW_GBPS = 1e6  # a petabyte per second: no interconnect is near it
SWEEP_DEFAULT_SIZES = tuple(8 << i for i in range(24))  # -b 8 -e 64M -f 2 (sizes.size_range)
SWEEP_DEFAULT_FACTOR = 2.0
SWEEP_MODES = ("pipelined", "blocking")  # nccl-tests' default, and its -z 1 (workloads/common.py)


@dataclass(frozen=True, kw_only=True)
class SweepConfig:
    """nccl-tests from Python: every size of each collective, timed and checked."""

    launch: LaunchOptions = field(default_factory=LaunchOptions, metadata={"flatten": True})
    ops: tuple[str, ...] = field(default=("all_reduce",), metadata={"flag": "--ops"})
    """Collectives, by ddplab's names (collectives.COLLECTIVES)."""
    sizes: tuple[int, ...] = SWEEP_DEFAULT_SIZES
    """The largest buffer of each measurement in bytes, as nccl-tests' -b/-e/-f make them; the command line
    spells them back as -b/-e/-f (sizes.range_args), so they must be such a range."""
    dtype: str = field(default="float", metadata={"flag": "--dtype"})
    mode: str = field(default="pipelined", metadata={"flag": "--mode"})
    """pipelined: nccl-tests' default; blocking: nccl-tests -z 1."""
    iters: int = field(default=20, metadata={"flag": "-n"})
    """Timed iterations per size."""
    warmup: int = field(default=5, metadata={"flag": "-w"})
    """Untimed iterations per size."""
    check: bool = field(default=True, metadata={"switch": ("--check", "--no-check")})
    """Check the results at every size with exact data."""
    repeat: int | None = field(default=None, metadata={"flag": "-R"})
    """Times each size is measured (the row reports the median); None: chosen per device when it runs."""
    min_busbw: float | None = field(default=None, metadata={"flag": "--min-busbw"})
    """Fail when the average busbw (GB/s, nccl-tests' footer) is below this."""
    sample: bool = field(default=True, metadata={"switch": ("", "--no-sample")})
    """Sample the ranks while the sweep runs (off: to measure the sampler's own cost)."""
    sample_while_timing: bool = field(default=False, metadata={"switch": ("--sample-while-timing", "")})
    """Let the sampler query the device inside timed windows too (the old behaviour, to test for spikes)."""
    engine: str = field(default="torch", metadata=ENGINE_FIELD)
    """torch, library (the collective library called directly on the same buffers) or both, side by side."""

    def __post_init__(self):
        from . import collectives
        from .collectives.common import DTYPES

        _check_engine(self.engine)

        _require(bool(self.ops), "invalid-collective", "--ops names no collective; valid: all, or a comma list of "
                                                       + ", ".join(collectives.COLLECTIVES))
        for op in self.ops:
            if op not in collectives.COLLECTIVES:
                raise invalid_choice("collective", op, collectives.COLLECTIVES)
        self._check_sizes()
        if self.dtype not in DTYPES:
            raise invalid_choice("dtype", self.dtype, DTYPES)
        if self.mode not in SWEEP_MODES:
            raise invalid_choice("mode", self.mode, SWEEP_MODES)
        check_number(self.iters, "-n", 1, SWEEP_MAX_ITERS, integer=True, reference="invalid-iters")
        check_number(self.warmup, "-w", 0, SWEEP_MAX_ITERS, integer=True, reference="invalid-warmup")
        if self.repeat is not None:
            check_number(self.repeat, "-R", 1, SWEEP_MAX_REPEAT, integer=True, reference="invalid-repeat")
        if self.min_busbw is not None:
            check_number(self.min_busbw, "--min-busbw", 0, SWEEP_MAX_BUSBW_GBPS, name="GB/s", low_open=True)

    def _check_sizes(self) -> None:
        check_size_range(self.sizes)

    def to_argv(self) -> list[str]:
        return argv_of(self) + size_range_argv(self.sizes)


def check_size_range(sizes: tuple[int, ...]) -> None:
    """Sizes as nccl-tests' -b/-e/-f make them (the command line spells them back that way)."""
    from .sizes import MAX_SIZE_BYTES, MAX_SIZES, range_args

    _require(0 < len(sizes) <= MAX_SIZES, "invalid-sizes", f"{len(sizes)} sizes; valid: 1 to {MAX_SIZES}")
    for size in sizes:
        check_number(size, "size", 1, MAX_SIZE_BYTES, integer=True, unit=" bytes", reference="invalid-size")
    _require(range_args(sizes, SWEEP_DEFAULT_FACTOR) is not None, "invalid-sizes",
             f"sizes {list(sizes)[:6]}{'...' if len(sizes) > 6 else ''} are not a range that "
             f"-b/-e/-f make (each size int(previous * factor), the same factor throughout)")


def size_range_argv(sizes: tuple[int, ...]) -> list[str]:
    """-b/-e/-f that give the same sizes back; each left out where it is the default."""
    from .sizes import range_args

    begin, end, factor = range_args(sizes, SWEEP_DEFAULT_FACTOR)
    out = []
    if sizes[0] != SWEEP_DEFAULT_SIZES[0]:
        out += ["-b", begin]
    if sizes[-1] != SWEEP_DEFAULT_SIZES[-1]:
        out += ["-e", end]
    if factor != SWEEP_DEFAULT_FACTOR:
        out += ["-f", _argv_text(factor)]
    return out


PAIRWISE_DEFAULT_REPEAT = 3  # pairs are compared with each other: the median of three, as on an accelerator


@dataclass(frozen=True, kw_only=True)
class PairwiseConfig:
    """Every pair of machines, one rank on each: all_reduce at each size, the slowest pair flagged.

    Runs on every machine of the job, as the other commands do across machines (--nnodes, --rdzv-endpoint);
    one rank per machine is enough (the default), more ranks wait while their machine's lowest one tests.
    """

    launch: LaunchOptions = field(default_factory=lambda: LaunchOptions(nproc=1), metadata={"flatten": True})
    sizes: tuple[int, ...] = SWEEP_DEFAULT_SIZES
    """The all_reduce sizes in bytes, as -b/-e/-f make them (the sweep's): the smallest gives each pair's
    latency, the largest its busbw."""
    iters: int = field(default=20, metadata={"flag": "-n"})
    """Timed iterations per size."""
    warmup: int = field(default=5, metadata={"flag": "-w"})
    """Untimed iterations per size."""
    repeat: int = field(default=PAIRWISE_DEFAULT_REPEAT, metadata={"flag": "-R"})
    """Times each size is measured; the median is kept."""

    def __post_init__(self):
        _require(self.launch.nnodes >= 2, "pairwise-needs-machines",
                 f"--nnodes {self.launch.nnodes}: pairwise tests pairs of machines; run it on every machine with "
                 f"--nnodes N (2 or more) and the same --rdzv-endpoint HOST:PORT")
        check_size_range(self.sizes)
        check_number(self.iters, "-n", 1, SWEEP_MAX_ITERS, integer=True, reference="invalid-iters")
        check_number(self.warmup, "-w", 0, SWEEP_MAX_ITERS, integer=True, reference="invalid-warmup")
        check_number(self.repeat, "-R", 1, SWEEP_MAX_REPEAT, integer=True, reference="invalid-repeat")

    def to_argv(self) -> list[str]:
        argv = argv_of(self)
        if "--nproc" not in argv:  # left out as LaunchOptions' default (2), which is not this command's (1)
            argv = ["--nproc", str(self.launch.nproc), *argv]
        return argv + size_range_argv(self.sizes)


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
        _require(launch.started_by is None, "not-under-torchrun",
                 "a drill starts and kills launchers of its own: run `ddplab drill` once per machine, not as "
                 "torchrun's workers")
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
        if not f.init:
            continue  # derived from the other fields: never an option of its own
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
    if isinstance(value, float):  # repr: the shortest text that parses back to the same float ("%g" rounds)
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


@dataclass(frozen=True)
class StagePlan:
    """One stage as the report shows it: its name and the command line that reproduces it alone."""

    name: str
    command: str  # the measurement's command word
    argv: list[str]


PROFILES = ("quick", "full", "soak")


@dataclass(frozen=True)
class RunConfig:
    """The whole lab: which profile, on which device, where its reports go."""

    profile: str = "quick"
    nproc: int = 2
    """Ranks of the shared-device stages."""
    device: str = "auto"
    out: str | None = None
    stage_deadline_s: float = 120.0
    """Every stage's hang timeout: seconds without progress before its ranks are cut."""
    stages: list[StagePlan] = field(default_factory=list)
    """Filled in once the machine is known (the env stage): each stage's command line."""

    def __post_init__(self):
        if self.profile not in PROFILES:
            raise invalid_choice("profile", self.profile, PROFILES)
        if self.device not in ("auto", *VENDORS):
            raise invalid_choice("device", self.device, ("auto", *VENDORS))
        check_number(self.stage_deadline_s, "--stage-deadline", 0, MAX_TIMEOUT_S, name="seconds", low_open=True)
        check_nproc(self.nproc)


@dataclass(frozen=True, kw_only=True)
class EnvConfig:
    """The doctor: describe this machine."""

    device: str = field(default="auto", metadata={"flag": "--device"})
    """Device type to describe, or auto for the detected accelerator (cpu when none)."""

    def __post_init__(self):
        if self.device not in ("auto", *VENDORS):
            raise invalid_choice("device", self.device, ("auto", *VENDORS))

    def to_argv(self) -> list[str]:
        return argv_of(self)


CLEAN_MAX_GRACE_S = 300.0


@dataclass(frozen=True, kw_only=True)
class CleanConfig:
    """List orphaned ranks, and with ``yes`` end exactly those (or the one process named by ``pid``)."""

    yes: bool = field(default=False, metadata={"switch": ("--yes", "")})
    """End the listed processes (default: only list them)."""
    grace_s: float = field(default=5.0, metadata={"flag": "--grace"})
    """Seconds between SIGTERM and SIGKILL."""
    pid: int | None = field(default=None, metadata={"flag": "--pid"})
    """End this one process instead of the orphans (with yes); whether it may be named is checked on the
    machine (procs.refuse_to_name), before anything is surveyed."""

    def __post_init__(self):
        check_number(self.grace_s, "--grace", 0, CLEAN_MAX_GRACE_S, unit=" seconds")
        if self.pid is not None:
            check_number(self.pid, "--pid", 0, 2**31 - 1, integer=True, reference="refused-pid")

    def to_argv(self) -> list[str]:
        return argv_of(self)


# ---------------------------------------------------------------------------------------- ddplab launch

DEFAULT_HANG_TIMEOUT_S = 600.0  # as long as torch's own default collective timeout (10 minutes)
LAUNCH_USAGE = "ddplab launch [torchrun options] [--hang-timeout S] [--out DIR] [--ras] [--] script.py [args]"
TARGET_KINDS = ("script", "module", "command")


@dataclass(frozen=True)
class Target:
    """The user's program, as torchrun's command line names it."""

    kind: str  # "script", "module" (-m) or "command" (--no-python)
    name: str
    args: tuple[str, ...] = ()

    def __post_init__(self):
        if self.kind not in TARGET_KINDS:
            raise invalid_choice("target kind", self.kind, TARGET_KINDS)
        object.__setattr__(self, "args", tuple(self.args))

    def boot_argv(self) -> list[str]:
        """The arguments after `python -u -m ddplab.job.boot`."""
        return [*self._flag(), self.name, *self.args]

    def launch_argv(self) -> list[str]:
        """The end of `ddplab launch`'s command line: the flag that names the kind, then ``--`` and the
        program, so that nothing of the program's is read as an option of ours or torchrun's."""
        return [*self._flag(), "--", self.name, *self.args]

    def command_line(self) -> str:
        """The program as the user would run it alone (one rank of it)."""
        import shlex

        prefix = {"script": ["python"], "module": ["python", "-m"], "command": []}[self.kind]
        return shlex.join([*prefix, self.name, *self.args])

    def _flag(self) -> list[str]:
        return {"script": [], "module": ["-m"], "command": ["--no-python"]}[self.kind]

    @classmethod
    def from_boot_argv(cls, argv: list[str]) -> "Target":
        if not argv or (argv[0] in ("-m", "--no-python") and len(argv) < 2):
            raise SystemExit("usage: python -m ddplab.job.boot [-m module | --no-python cmd | script.py] [args...]")
        if argv[0] == "-m":
            return cls("module", argv[1], tuple(argv[2:]))
        if argv[0] == "--no-python":
            return cls("command", argv[1], tuple(argv[2:]))
        return cls("script", argv[0], tuple(argv[1:]))


def check_torchrun_numbers(torchrun: dict[str, Any]) -> None:
    """torchrun's numeric options that torch itself checks only once the job runs (an assert in the agent, or
    nothing: 10000 ranks start spawning), refused here as every other command refuses them. A word for
    --nproc-per-node (gpu, cpu, auto, ...) counts the machine's devices: job/torchrun_args.py checks that count
    with the same rule once torch has counted them."""
    nproc = torchrun.get("nproc_per_node")
    if isinstance(nproc, str) and nproc.lstrip("-").isdigit():
        nproc = int(nproc)
    if isinstance(nproc, int):
        check_nproc(nproc, "--nproc-per-node")
    if torchrun.get("monitor_interval") is not None:
        check_number(torchrun["monitor_interval"], "--monitor-interval", 0, MAX_TIMEOUT_S, name="seconds",
                     low_open=True)


# The type of each torchrun option's value as torchrun's parser gives it (a switch is a boolean; None where the
# option has no default), so a report read back refuses a string where the job ran with a number or a switch
# (records/codec.py ``keys``). Options a newer torch adds are read as any JSON value; a test checks this table
# against the installed torch's parser.
TORCHRUN_SWITCHES = ("standalone", "module", "no_python", "run_path", "virtual_local_rank")
TORCHRUN_VALUE_TYPES: dict[str, Any] = {
    **{name: bool for name in TORCHRUN_SWITCHES},
    "max_restarts": int, "node_rank": int, "master_port": int | None, "shutdown_timeout": int | None,
    "monitor_interval": float,
    "duplicate_stdout_filters": list[str], "duplicate_stderr_filters": list[str],
    **{name: str | None for name in (
        "nnodes", "nproc_per_node", "rdzv_backend", "rdzv_endpoint", "rdzv_id", "rdzv_conf", "start_method",
        "event_log_handler", "role", "log_dir", "redirects", "tee", "local_ranks_filter", "master_addr",
        "local_addr", "logs_specs", "numa_binding", "signals_to_handle")},
}

# torchrun options that the target's kind spells (Target.launch_argv), not the options list.
TARGET_OPTIONS = ("module", "no_python")


@dataclass(frozen=True, kw_only=True)
class LaunchConfig:
    """`ddplab launch`: the user's program, torchrun's options for it, and ddplab's supervision.

    ``torchrun`` holds torchrun's options as its own parser reads them (commands/launch.py); the library
    turns them into elastic's launch configuration (job/torchrun_args.py). In a report they are the options
    the job ran with: the single-machine rendezvous ddplab chose (as torchrun's --standalone does) included.
    """

    target: Target
    hang_timeout_s: float | None = DEFAULT_HANG_TIMEOUT_S
    """Declare a hang when a rank waits and no rank progressed this long; None (--hang-timeout 0): off."""
    out: str | None = None
    """The job directory (report.json, report.html, stacks, flight records); default ./ddplab-runs/<run id>;
    one that already holds a run is refused."""
    ras: bool = False
    """On a declared hang, also ask the collective library's RAS service (off: queries have crashed jobs)."""
    torchrun: dict[str, Any] = field(default_factory=dict, metadata={"keys": TORCHRUN_VALUE_TYPES})
    """torchrun's options by their parser's names (nproc_per_node, rdzv_backend, ...), JSON values."""
    worker_env: dict[str, str] = field(default_factory=dict, compare=False)
    """Filled in at launch, not asked for: what torch's launcher would set in its own environment for the
    ranks (OMP_NUM_THREADS for several ranks), handed to the ranks instead."""

    def __post_init__(self):
        if self.hang_timeout_s is not None:
            check_number(self.hang_timeout_s, "--hang-timeout", 0, MAX_TIMEOUT_S, name="seconds",
                         unit=" (0 turns it off)")
            object.__setattr__(self, "hang_timeout_s", float(self.hang_timeout_s) or None)  # 0 turns it off
        check_torchrun_numbers(self.torchrun)
        if self.torchrun.get("run_path"):
            raise UsageError("unsupported-option", "--run-path runs the script inside torchrun's own worker "
                                                   "function; ddplab runs each rank as its own python process",
                             hint="drop --run-path: the script runs as `python script.py` in every rank")

    def to_argv(self) -> list[str]:
        """Every torchrun option spelt out (their defaults come from PET_* variables, which differ between
        machines), then ddplab's, then the program."""
        out: list[str] = []
        for name, value in sorted(self.torchrun.items()):
            if name in TARGET_OPTIONS or value is None or value is False or value == []:
                continue
            flag = "--" + name.replace("_", "-")
            if value is True:
                out.append(flag)
            else:
                out.append(f"{flag}={_argv_text(value)}")
        out.append(f"--hang-timeout={_number_text(self.hang_timeout_s or 0)}")
        if self.out is not None:
            out.append(f"--out={self.out}")
        if self.ras:
            out.append("--ras")
        return out + self.target.launch_argv()

    def command_line(self) -> str:
        """`ddplab launch ...`: what reproduces this job."""
        import shlex

        return shlex.join(["ddplab", "launch", *self.to_argv()])
