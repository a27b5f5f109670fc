"""Where a run's ranks go, as the placement policy (job/policy.py) decided it: which device each rank uses, its memory
cap, the backend and the sharing daemon, every option weighed with why. A record: a session writes it into its
report (records/session.py), the ranks and the lab read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Placement.sharing_daemon: what the session does about the device-sharing daemon.
PRIVATE_DAEMON = "private"  # start one for this run, stop it afterwards
RUNNING_DAEMON = "running"  # one already runs (not ours): use it as it is, leave it running


@dataclass(frozen=True)
class Option:
    """One setup the policy weighed for the ranks, and its verdict."""

    setup: str  # e.g. "nccl with MPS (private daemon)"
    backend: str
    sharing_daemon: str | None  # PRIVATE_DAEMON, RUNNING_DAEMON or None
    chosen: bool
    why: str


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
    sharing_daemon: str | None = None  # PRIVATE_DAEMON, RUNNING_DAEMON or None: no daemon for this run
    considered: tuple[Option, ...] = ()  # every setup weighed, the chosen one marked

    @property
    def nproc(self) -> int:
        """Ranks this launcher starts: the one rank count (LaunchOptions.nproc is only the request)."""
        return len(self.device_indices)

    def global_rank(self, local_rank: int, node_base: int) -> int:
        """Elastic numbers each machine's ranks as one block in local-rank order, from ``node_base``."""
        return node_base + local_rank

    def device_label(self, local_rank: int) -> str:
        return self.device_type if self.host_only else f"{self.device_type}:{self.device_indices[local_rank]}"
