"""Where a run listens: decided before anything starts, recorded in every report, shown by `ddplab env`.

A run on one machine must not be reachable from the network (docs/exposure.md): its rendezvous store listens on a
socket ddplab bound to 127.0.0.1 (when this torch has the parts), and the collective libraries' sockets are pinned
to the loopback interface through each vendor's socket-interface variable, unless the user set it. A job across
machines has one machine host the store on the endpoint's own address, and pins the collectives to the interface
that routes to the endpoint. Whatever cannot be kept on loopback is said, never claimed.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from ..records.codec import to_json
from ..records.listen import Listened, SocketPin

if TYPE_CHECKING:
    from .endpoint import StorePlan

LOOPBACK_HOST = "127.0.0.1"
# The address this machine uses toward the endpoint, for its ranks (containers may share one hostname).
NODE_ADDRESS_ENV = "DDPLAB_NODE_ADDR"
ACROSS_MACHINES = ("A job across machines is reached over the network: the rendezvous store listens on one address, "
                   "and the ranks' collective sockets on the interface that routes to the endpoint.")


@dataclass(frozen=True)
class Exposure:
    single_machine: bool
    loopback_store: bool  # the rendezvous store listens on 127.0.0.1 only
    store: str  # where the store listens, in words
    store_port: int  # the port asked for (0: a free one)
    sockets: tuple[SocketPin, ...] = ()
    why_not: tuple[str, ...] = ()  # why loopback-only cannot be claimed
    across: StorePlan | None = None  # several machines: where this one meets the others (cluster/endpoint.py)

    @property
    def loopback_only(self) -> bool:
        return self.single_machine and self.loopback_store and all(p.loopback for p in self.sockets)

    @property
    def address(self) -> str | None:
        """The one address the store listens on (hosted here) or is reached at; None: every interface."""
        if self.across is not None:
            return self.across.store_host
        return LOOPBACK_HOST if self.loopback_store else None

    def environment(self) -> dict[str, str]:
        """What the launcher sets for its ranks; values the user set are left alone."""
        from ..basics.rundir import STATUS_STORE_ENV

        env = {p.variable: p.value for p in self.sockets if p.set_by == "ddplab"}
        if self.across is not None:
            env[STATUS_STORE_ENV] = self.across.store_address  # every machine's supervisor reads the job there
            if self.across.node_address:
                env[NODE_ADDRESS_ENV] = self.across.node_address
        return env

    def listening_at(self, port: int) -> Exposure:
        return dataclasses.replace(self, store=f"{LOOPBACK_HOST}:{port}", store_port=port)

    def meeting_through(self, store: StorePlan) -> Exposure:
        """The record once the launcher knows who hosts the store (another launcher on this machine may)."""
        return dataclasses.replace(self, across=store, store=_store_words(store))

    def summary(self) -> str:
        where = f"rendezvous store {self.store}"
        if self.sockets:
            where += "; collectives " + ", ".join(
                f"{p.variable}={p.value}" + ("" if p.set_by == "ddplab" else " (yours)") for p in self.sockets)
        if self.loopback_only:
            return f"loopback only: {where}"
        if self.across is not None:  # not loopback, by design: say where, and only what needs saying
            return f"across machines: {where}" + "".join(f". {why}" for why in self.why_not if why != ACROSS_MACHINES)
        return f"NOT loopback only: {where}. " + " ".join(self.why_not)

    def record(self) -> Listened:
        """What the reports keep (records/listen.py)."""
        return Listened(loopback_only=self.loopback_only, single_machine=self.single_machine, store=self.store,
                        sockets=list(self.sockets), why_not=list(self.why_not), summary=self.summary(),
                        address=self.address, port=self.store_port,
                        across_machines=self.across.to_dict() if self.across is not None else None)

    def to_dict(self) -> dict:
        """The record as JSON (the run directory's listen.json)."""
        return to_json(self.record())


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


def across_machines(store: StorePlan, socket_variables: tuple[str, ...], environ: Mapping[str, str],
                    loopback_interface: str) -> Exposure:
    """A job across machines: the store on one address, the collectives' sockets pinned to the interface that
    routes to the endpoint unless the user set them."""
    pins = tuple(_pin(name, environ, store.interface, loopback_interface) for name in socket_variables) \
        if store.interface else ()
    yours = [f"You set {p.variable}={p.value}: the ranks' collective sockets listen there, not on "
             f"{store.interface}, the interface that routes to {store.endpoint.host}."
             for p in pins if p.set_by == "user" and p.value.lstrip("=") != store.interface]
    return Exposure(False, False, _store_words(store), store.endpoint.port, pins,
                    (ACROSS_MACHINES, *store.notes, *yours), store)


def _store_words(store: StorePlan) -> str:
    if store.hosts_store:
        return f"{store.store_address} (hosted by this machine, listening on {store.bind_address} only)"
    return f"{store.endpoint} (hosted by another launcher; reached at {store.store_address})"


def _pin(name: str, environ: Mapping[str, str], interface: str, loopback_interface: str | None = None) -> SocketPin:
    loopback_interface = loopback_interface or interface
    if name in environ:
        value = environ[name]
        # a leading "=" asks some libraries for an exact interface-name match
        return SocketPin(name, value, "user", value.lstrip("=") == loopback_interface)
    return SocketPin(name, interface, "ddplab", interface == loopback_interface)


def where_to_listen(nnodes: int, endpoint: str, device_type: str, environ: Mapping[str, str] = os.environ,
                    rdzv_host: str = "auto") -> Exposure:
    """``plan`` (one machine) or ``across_machines`` over this machine's facts."""
    from ..platform.detect import loopback_interface
    from ..platform.vendors import VENDORS, socket_interface_envs

    variables = socket_interface_envs(VENDORS[device_type])
    unsupported = loopback_store_unsupported()
    if nnodes > 1:
        if unsupported:  # no way to bind the store ourselves: torch's c10d store, every interface
            return plan(nnodes, endpoint, (), environ, "", None)
        from .endpoint import plan_store

        return across_machines(plan_store(endpoint, rdzv_host), variables, environ, loopback_interface())
    return plan(nnodes, endpoint, variables, environ, loopback_interface(), unsupported)


def loopback_store_unsupported() -> str | None:
    """Why this torch cannot serve the rendezvous on a socket ddplab bound, or None when it can."""
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
