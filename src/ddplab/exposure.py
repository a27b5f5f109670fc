"""Where a run listens: decided before anything starts, recorded in every report, shown by `ddplab env`.

A run on one machine must not be reachable from the network (docs/exposure.md):
- its rendezvous store listens on a socket ddplab bound to 127.0.0.1 (rendezvous.py), when this
  torch has the parts for it (``loopback_store_unsupported``);
- the collective libraries' own sockets are pinned to the loopback interface through each
  vendor's socket-interface variable (platform/vendors.py), unless the user set it.
A job across machines keeps torch's c10d rendezvous, whose store listens on every interface.
Whatever cannot be kept on loopback is said, never claimed.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Mapping

LOOPBACK_HOST = "127.0.0.1"


@dataclass(frozen=True)
class SocketPin:
    """One socket-interface variable as the ranks will see it."""

    variable: str
    value: str
    set_by: str  # "ddplab" (pinned to loopback) or "user" (left as the user set it)
    loopback: bool


@dataclass(frozen=True)
class Exposure:
    single_machine: bool
    loopback_store: bool  # the rendezvous store listens on 127.0.0.1 only
    store: str  # where the store listens, in words
    store_port: int  # the port asked for (0: a free one)
    sockets: tuple[SocketPin, ...] = ()
    why_not: tuple[str, ...] = ()  # why loopback-only cannot be claimed

    @property
    def loopback_only(self) -> bool:
        return self.single_machine and self.loopback_store and all(p.loopback for p in self.sockets)

    def environment(self) -> dict[str, str]:
        """What the launcher sets for its ranks; values the user set are left alone."""
        return {p.variable: p.value for p in self.sockets if p.set_by == "ddplab"}

    def listening_at(self, port: int) -> Exposure:
        return dataclasses.replace(self, store=f"{LOOPBACK_HOST}:{port}", store_port=port)

    def summary(self) -> str:
        where = f"rendezvous store {self.store}"
        if self.sockets:
            where += "; collectives " + ", ".join(
                f"{p.variable}={p.value}" + ("" if p.set_by == "ddplab" else " (yours)") for p in self.sockets)
        if self.loopback_only:
            return f"loopback only: {where}"
        return f"NOT loopback only: {where}. " + " ".join(self.why_not)

    def to_dict(self) -> dict:
        return {"loopback_only": self.loopback_only, "single_machine": self.single_machine,
                "store": self.store, "sockets": [dataclasses.asdict(p) for p in self.sockets],
                "why_not": list(self.why_not), "summary": self.summary()}


def plan(nnodes: int, endpoint: str, socket_variables: tuple[str, ...], environ: Mapping[str, str],
         loopback_interface: str, store_unsupported: str | None) -> Exposure:
    """Decide where a run listens, from facts only (tests call this directly)."""
    port = int(endpoint.rpartition(":")[2] or 0)
    if nnodes > 1:
        return Exposure(False, False, f"{endpoint} (torch's c10d store: every interface)", port, (),
                        ("A job across machines is reached over the network: torch's c10d rendezvous store "
                         "listens on every interface, and the collectives use the interface the hostname "
                         "resolves to.",))
    pins = tuple(_pin(name, environ, loopback_interface) for name in socket_variables)
    why_not = [f"You set {p.variable}={p.value}: the ranks' collective sockets listen there, not on loopback."
               for p in pins if not p.loopback]
    if store_unsupported:
        store = f"every interface, port {port or '(free)'} (torch's c10d store)"
        return Exposure(True, False, store, port, pins, (store_unsupported, *why_not))
    return Exposure(True, True, f"{LOOPBACK_HOST}:{port or '(free port)'}", port, pins, tuple(why_not))


def _pin(name: str, environ: Mapping[str, str], loopback_interface: str) -> SocketPin:
    if name in environ:
        value = environ[name]
        # a leading "=" asks some libraries for an exact interface-name match
        return SocketPin(name, value, "user", value.lstrip("=") == loopback_interface)
    return SocketPin(name, loopback_interface, "ddplab", True)


def where_to_listen(nnodes: int, endpoint: str, device_type: str, environ: Mapping[str, str] = os.environ) -> Exposure:
    """``plan`` over this machine's facts: its loopback interface, its torch, the vendor's variables."""
    if nnodes > 1:
        return plan(nnodes, endpoint, (), environ, "", None)
    from .platform.detect import loopback_interface
    from .platform.vendors import VENDORS, socket_interface_envs

    return plan(nnodes, endpoint, socket_interface_envs(VENDORS[device_type]), environ, loopback_interface(),
                loopback_store_unsupported())


def loopback_store_unsupported() -> str | None:
    """Why this torch cannot serve the rendezvous on loopback only, or None when it can."""
    import torch
    from torch.distributed import TCPStore
    from torch.distributed.elastic import rendezvous

    needed = {
        "RendezvousInfo": hasattr(rendezvous, "RendezvousInfo"),
        "RendezvousHandler.use_agent_store": hasattr(rendezvous.RendezvousHandler, "use_agent_store"),
        "TCPStore(master_listen_fd=...)": "master_listen_fd" in (TCPStore.__init__.__doc__ or ""),
    }
    missing = [name for name, present in needed.items() if not present]
    if missing:
        return (f"torch {torch.__version__} has no {', '.join(missing)}, so its rendezvous store listens on "
                f"every interface.")
    return None
