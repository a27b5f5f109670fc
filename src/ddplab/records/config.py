"""The launch options every multi-rank command shares: ``LaunchOptions``, a frozen dataclass validated on
construction (each measurement's own Config lives beside it).

Validation here is pure (ranges and names, no I/O); checks that need the machine live in ``job/policy.py`` and in
each measurement's ``run``; the vendor table's names are checked by the command line and again by the platform. All
raise ``UsageError`` before any process starts. The commands' options are made from the fields, their docstrings are
the help, and ``to_argv`` gives the command line back, so a lab stage can be reproduced alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..basics.cli_options import Range, Vocabulary, argv_of, check_fields, one_of, option
from ..basics.validators import MAX_NODES, MAX_NPROC, MAX_TIMEOUT_S, check_choice, is_endpoint, require

STARTED_BY = ("torchrun",)  # who starts the ranks when not ddplab's own launcher (LaunchOptions.started_by)
RDZV_HOST_CHOICES = ("auto", "yes", "no")  # torch's is_host rendezvous setting, as --rdzv-host says it
DEFAULT_RESERVE = 0.10  # device memory left for contexts and communicator buffers
# The vendor table's names (platform/vendors.py), which the command layer defines (commands/options.py).
DEVICES = Vocabulary("device")
BACKENDS = Vocabulary("backend")
SECONDS = Range(0, MAX_TIMEOUT_S, name="seconds", low_open=True)


@dataclass(frozen=True, kw_only=True)
class LaunchOptions:
    """Where and how ranks start. Shared by every multi-rank command."""

    nproc: int = option("--nproc", default=2, range=Range(1, MAX_NPROC, unit=" ranks per node"))
    """Ranks on this node (under torchrun: its ranks on this node, unless given)."""
    placement: str = one_of({"shared": "--share-device", "per-device": "--per-device", "spread": "--spread"},
                            default="auto")
    """Where the ranks run. shared: every rank on device 0, with a memory cap; per-device: rank i on device i;
    spread: rank i on device i mod devices, several ranks on every device; auto: shared when nproc > devices,
    else per-device."""
    backend: str = option("--backend", default="auto", choices=BACKENDS)
    """Collective backend, or auto to let the placement policy choose."""
    device: str = option("--device", default="auto", choices=DEVICES)
    """Device type, or auto for the detected accelerator (cpu when none)."""
    memory_fraction: float | None = option("--memory-fraction", default=None,
                                           range=Range(0, 1, name="fraction", low_open=True))
    """Allocator cap per rank on a shared device; default: (1 - reserve) / ranks on the device."""
    reserve: float = option("--reserve", default=DEFAULT_RESERVE, range=Range(0, 1, name="reserve", high_open=True))
    """Share of device memory left for contexts and communicator buffers."""
    timeout_s: float = option("--timeout", default=120.0, range=SECONDS)
    """Process-group timeout in seconds, passed to init_process_group."""
    run_dir: str | None = option("--run-dir", default=None, metavar="DIR")
    """Directory for this run's logs and results; default: ./ddplab-runs/<run id>."""
    sharing_daemon: str = one_of({"on": "--mps", "off": "--no-mps"}, default="auto")
    """The device-sharing daemon (MPS). on: insist, using a running one, else a private one started for this run
    and stopped afterwards (exit 3 where none can be used); off: never, ranks sharing a device time-slice it;
    auto: use one when several ranks share a device and the library allows it."""
    hang_timeout_s: float | None = option("--hang-timeout", default=None, range=SECONDS)
    """Seconds without progress from any rank before ddplab's supervisor declares a hang; default: off."""
    nnodes: int = option("--nnodes", default=1, range=Range(1, MAX_NODES))
    """Machines in the job, each running this command with the same --rdzv-endpoint (torch's c10d rendezvous);
    under srun or mpirun: the nodes it started, unless given."""
    rdzv_endpoint: str | None = option("--rdzv-endpoint", default=None, metavar="HOST:PORT")
    """HOST:PORT of the c10d rendezvous store, the same on every machine; default: 127.0.0.1 with a free port
    (one machine), under srun the first node."""
    rdzv_id: str | None = option("--rdzv-id", default=None, json={"omit_none": True})
    """Several machines: the job's name, the same on every machine, new for every launch on one endpoint
    (torchrun's --rdzv-id); default: derived from the endpoint. Drills derive one per session from it."""
    rdzv_host: str = option("--rdzv-host", default="auto", choices=RDZV_HOST_CHOICES)
    """Several machines: does this one host the rendezvous store? auto: when the endpoint is one of its interface
    addresses (under srun: node 0); yes / no decide (torch's is_host rendezvous setting)."""
    started_by: str | None = field(default=None, metadata={"omit_none": True})
    """Who starts the ranks: None, ddplab's own launcher (through elastic); "torchrun": ddplab was started as
    each of torchrun's workers, and this process is one rank (commands/options.py reads it from the
    environment). Absent from the JSON config unless torchrun."""

    def __post_init__(self):
        check_fields(self)
        require(self.nnodes == 1 or bool(self.rdzv_endpoint) or self.started_by is not None, "rdzv-endpoint-required",
                f"--nnodes {self.nnodes} needs --rdzv-endpoint HOST:PORT, the same on every machine")
        require(self.rdzv_endpoint is None or is_endpoint(self.rdzv_endpoint), "invalid-rdzv-endpoint",
                f'--rdzv-endpoint "{self.rdzv_endpoint}" is not HOST:PORT (port 1-65535), e.g. node0:29400')
        require(self.rdzv_id is None or bool(re.fullmatch(r"[A-Za-z0-9_.:-]{1,128}", self.rdzv_id)),
                "invalid-rdzv-id", f'--rdzv-id "{self.rdzv_id}": 1 to 128 letters, digits, "_", ".", ":", "-"')
        if self.started_by is not None:
            check_choice(self.started_by, "started_by", STARTED_BY)
        if self.started_by == "torchrun":  # this process is one rank: nothing of ddplab's launcher is here
            require(self.hang_timeout_s is None, "not-under-torchrun",
                    "--hang-timeout: ddplab's supervisor lives in its own launcher, and torchrun is the launcher here")
            require(self.sharing_daemon != "on", "not-under-torchrun",
                    "--mps: the sharing daemon is started by ddplab's launcher, and torchrun is the launcher here")
            object.__setattr__(self, "sharing_daemon", "off")  # auto: none can be started by one rank for all

    to_argv = argv_of  # the command line that gives this config back

    @staticmethod
    def json_upgrade(data: dict) -> dict:
        """Reports before the three-valued daemon option wrote --mps as a boolean."""
        if isinstance(data.get("sharing_daemon"), bool):
            return {**data, "sharing_daemon": "on" if data["sharing_daemon"] else "auto"}
        return data

