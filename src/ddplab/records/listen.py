"""Where a run listened: its rendezvous store and the ranks' collective sockets (cluster/exposure.py decides it;
docs/exposure.md says why). One shape for every report that says it: `env` (where a run would listen),
every lab command's session, and `ddplab launch`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SocketPin:
    """One collective library's socket-interface variable as the ranks see it."""

    variable: str
    value: str
    set_by: str  # "ddplab" (pinned by ddplab) or "user" (left as the user set it)
    loopback: bool


@dataclass(frozen=True)
class Listened:
    """The store's address and the sockets' pins, and whether the run is reachable from the network."""

    loopback_only: bool
    single_machine: bool
    store: str  # where the store listens, in words
    sockets: list[SocketPin]
    why_not: list[str]  # why loopback only cannot be claimed
    summary: str
    address: str | None = None  # the one address the store listens on or is reached at; None: every interface
    port: int | None = None  # the store's port (0: a free one, not known yet); None in `env` reports before it
    across_machines: Any = None  # ddplab's own store across machines (cluster/endpoint.StorePlan.to_dict())
