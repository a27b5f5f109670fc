"""Where a job listens and who can reach it: decided before anything starts (``where_to_listen``), held while the
job runs (``meet``), recorded in every report, shown by `ddplab env`.

A run on one machine must not be reachable from the network (docs/exposure.md): its rendezvous store listens on a
socket ddplab bound to 127.0.0.1 (when this torch has the parts), and the collective libraries' sockets are pinned
to the loopback interface through each vendor's socket-interface variable, unless the user set it. A job across
machines has one machine host the store on the endpoint's own address (endpoint.py decides which), and pins the
collectives to the interface that routes to the endpoint. A rendezvous the user placed is theirs, and said to be.
Whatever cannot be kept on loopback is said, never claimed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import socket
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Iterator, Mapping

from ..basics import interrupts
from ..basics.validators import port_number
from ..errors import EnvironmentUnsupported
from ..records.codec import to_json
from ..records.session import Listened, SocketPin

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
    port = port_number(endpoint.rpartition(":")[2])
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
    """``plan`` (one machine) or ``across_machines`` over this machine's facts; ``environ``: what the ranks will
    see (a socket variable set there is the user's, and kept)."""
    from ..platform.probe import loopback_interface
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


def placed_by_user(config, why: str) -> Exposure:
    """A rendezvous the user put across machines or on an address of theirs (torch's LaunchConfig ``config``):
    reached over the network as they arranged, ``why`` in words."""
    endpoint = config.rdzv_endpoint
    return Exposure(single_machine=config.max_nodes == 1, loopback_store=False,
                    store=f"{endpoint or '(no endpoint)'} (torch's {config.rdzv_backend} rendezvous)",
                    store_port=port_number((endpoint or "").rpartition(":")[2]),
                    why_not=(why[0].upper() + why[1:] + ".",))


def torchruns_store(nnodes: int, environ: Mapping[str, str] = os.environ) -> Exposure:
    """Where a job torchrun started listened: torchrun's rendezvous and store (nothing of it was decided here)."""
    address, port = environ.get("MASTER_ADDR"), environ.get("MASTER_PORT", "0")
    return Exposure(single_machine=nnodes == 1, loopback_store=False,
                    store=f"{address}:{port} (torchrun's store)", store_port=port_number(port),
                    why_not=("torchrun started these ranks: its rendezvous store and the collectives' sockets are "
                             "where torchrun and the environment put them, not decided by ddplab.",))


# --- the meeting: the sockets held while the job runs ---------------------------------------------


class CannotListen(Exception):
    """The loopback socket for a one-machine rendezvous could not be bound (the port asked for is taken)."""


@dataclass(frozen=True)
class Meeting:
    """How elastic's agent meets its ranks: the rendezvous backend to name, what to add to its configuration,
    how the rendezvous names this machine, and where the run listens (with the port the store got)."""

    backend: str
    configs: dict
    exposure: Exposure
    local_addr: str | None = None
    across_machines: bool = False


@dataclass(frozen=True)
class Rendezvous:
    """The lab's own rendezvous options (--nnodes, --rdzv-endpoint, --rdzv-host, --rdzv-id)."""

    nnodes: int = 1
    endpoint: str = "127.0.0.1:0"  # one machine: the loopback store (rendezvous.py) on a free port
    join_timeout_s: float = 120.0  # several machines: also how long to wait for the store to answer
    host: str = "auto"  # several machines: host the store here? auto (the endpoint is one of our addresses), yes, no
    job_id: str | None = None  # several machines: the job's name (--rdzv-id); None: the endpoint's

    @classmethod
    def from_options(cls, opts) -> "Rendezvous":
        """The rendezvous a command's LaunchOptions ask for (--nnodes, --rdzv-endpoint, --rdzv-host, --rdzv-id)."""
        return cls(nnodes=opts.nnodes, endpoint=opts.rdzv_endpoint or cls.endpoint, host=opts.rdzv_host,
                   job_id=opts.rdzv_id)

    @property
    def run_id(self) -> str | None:
        """Every machine of a job must name the same rendezvous; one machine uses its own run id."""
        return f"ddplab-{self.job_id or self.endpoint}" if self.nnodes > 1 else None


@contextlib.contextmanager
def meet(exposure: Exposure, backend: str, rdzv: Rendezvous | None = None) -> Iterator[Meeting]:
    """Where the launcher meets its ranks, for as long as the block runs. Across machines (``exposure.across``):
    ddplab's rendezvous over the store this machine hosts or reaches (``rdzv`` says how long to wait). One machine,
    where this torch has the parts (``exposure.loopback_store``): the one place a launcher keeps its rendezvous off
    the network, a socket bound to 127.0.0.1 (``CannotListen`` before anything starts). Otherwise torch's
    ``backend``, where torch or the user puts it."""
    if exposure.across is not None:
        from . import rendezvous

        with host_or_reach(exposure.across, rdzv.join_timeout_s, session=rdzv.run_id) as met:
            yield Meeting(rendezvous.register_across_machines(), dict(met.rdzv_configs),
                          exposure.meeting_through(met.store), local_addr=met.store.node_address,
                          across_machines=True)
        return
    if not exposure.loopback_store:
        yield Meeting(backend, {}, exposure)
        return
    from . import rendezvous

    try:
        listener = bind_loopback(exposure.store_port)
    except OSError as exc:
        raise CannotListen(f"cannot listen on {exposure.store}: {exc}") from exc
    with listener:  # the store serves on a duplicate of it; this copy is closed when the block ends
        yield Meeting(rendezvous.register(), {rendezvous.LISTEN_FD_KEY: listener.fileno()},
                      exposure.listening_at(listener.getsockname()[1]))


def listening_socket(address: str, port: int) -> socket.socket:
    """A TCP socket listening on ``address`` only (port 0: a free one), never every interface. The caller closes
    it; OSError when it cannot be bound."""
    sock = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as TCPStore's own server does
        sock.bind((address, port))
        sock.listen(socket.SOMAXCONN)
    except OSError:
        sock.close()
        raise
    return sock


def bind_loopback(port: int = 0) -> socket.socket:
    """A listening TCP socket on 127.0.0.1 (port 0: a free one). The caller closes it."""
    return listening_socket(LOOPBACK_HOST, port)


class StoreAddressInUse(Exception):
    """The endpoint's port is taken on this machine: with --rdzv-host auto, another launcher here hosts it."""


def bind_store_socket(plan: StorePlan) -> socket.socket:
    """The listening socket a job's store across machines will serve on: the plan's one address. Raises
    StoreAddressInUse when the port is taken (the caller decides what that means), else EnvironmentUnsupported."""
    from .endpoint import Endpoint

    address, port = plan.bind_address, plan.endpoint.port
    try:
        return listening_socket(address, port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise StoreAddressInUse(f"{Endpoint(address, port)} is already in use on this machine") from exc
        raise EnvironmentUnsupported(
            "rdzv-store-cannot-listen",
            f"cannot host the rendezvous store on {Endpoint(address, port)} ({plan.decided_by}): {exc.strerror}",
            hint=f"use a free port in --rdzv-endpoint, or --rdzv-host no if another machine hosts {plan.endpoint}")


@dataclass(frozen=True)
class StoreMeeting:
    """How this machine takes part in the job's rendezvous, once the store's host is settled."""

    store: "StorePlan"
    rdzv_configs: dict


_SESSION_POLL_S = 0.5  # how often a joining machine asks the store whether it serves this launch's session


@contextlib.contextmanager
def host_or_reach(store: "StorePlan", wait_s: float, session: str | None = None) -> Iterator[StoreMeeting]:
    """Across machines: host the store (bind its socket) or wait, bounded, until it answers; exit 3 when it cannot,
    ``StoreWaitStopped`` when Ctrl+C or SIGTERM ends the wait.

    ``session`` (the rendezvous run id, new for every launch): a machine that reaches the store also waits until it
    serves that session, else launches in a row on one endpoint meet the previous launch's closing store. With
    ``--rdzv-host auto`` a taken port on this machine's own address means another launcher here hosts it: this one
    joins as a client. The bound socket is closed when the block ends (the store serves on its own duplicate).
    """
    from . import rendezvous
    from .endpoint import wait_for_store

    listener = None
    if store.hosts_store:
        try:
            listener = bind_store_socket(store)
        except StoreAddressInUse as exc:
            if store.forced:
                raise EnvironmentUnsupported("rdzv-store-cannot-listen", f"--rdzv-host yes, but {exc}: this machine "
                                             "cannot host the store there",
                                             hint="choose a free port for --rdzv-endpoint on every machine") from exc
            store = store.as_client(f"{store.decided_by}, but {exc}: another launcher on this machine hosts it")
    try:
        if listener is not None:
            yield StoreMeeting(store, {rendezvous.LISTEN_FD_KEY: listener.fileno(),
                                       rendezvous.STORE_HOST_KEY: store.bind_address})
        else:
            answered = wait_for_store(store, wait_s, stop_requested=interrupts.requested)
            if session is not None:
                _wait_for_session(store, answered.address, session, wait_s - answered.waited_s)
            yield StoreMeeting(store, {rendezvous.STORE_HOST_KEY: answered.address})
    finally:
        if listener is not None:
            rendezvous.stop_hosting(listener.fileno())
            listener.close()


def _wait_for_session(store: "StorePlan", address: str, session: str, wait_s: float) -> None:
    """Until the store at ``address`` serves ``session`` (its host set the session's key); a store that goes
    away meanwhile (an earlier launch's, closing) is reached again. Exit 3 when it never does."""
    from torch.distributed import TCPStore

    from .endpoint import StoreWaitStopped
    from .rendezvous import session_key

    deadline = time.monotonic() + max(wait_s, _SESSION_POLL_S)
    client = None
    while True:
        stop = interrupts.requested()
        if stop:
            raise StoreWaitStopped(f"{stop} while waiting for the store at {store.endpoint} to serve this job")
        try:
            client = client or TCPStore(address, store.endpoint.port, None, False, timedelta(seconds=5))
            if client.check([session_key(session)]):
                return
        except Exception:  # noqa: BLE001 - the store closed (an earlier launch's) or is not up yet: reach it again
            client = None
        if time.monotonic() >= deadline:
            raise EnvironmentUnsupported(
                "rdzv-session-not-found",
                f"the rendezvous store at {store.endpoint} answers, but not for this job ({session}) after "
                f"{max(wait_s, _SESSION_POLL_S):.0f} s: the machine that hosts it runs another job or another step",
                hint="run the same ddplab command (the same drills, in the same order) on every machine, with the "
                     "same --rdzv-endpoint and --rdzv-id")
        time.sleep(_SESSION_POLL_S)
