"""Which machine hosts a job's c10d store, where it listens, and how the others reach it.

Every machine of a job runs ddplab with the same ``--rdzv-endpoint HOST:PORT``. torch decides whether a machine
hosts the store by comparing HOST with its hostname, which in containers often resolves to 127.0.0.1, so no
machine hosts it and every launcher times out. Here ``decide`` (pure) works from the machine's own interface
addresses: HOST resolves to one of them -> this machine hosts the store, bound to that address only
(``--rdzv-host yes|no`` overrides); the interface that routes to the endpoint is the one the collective
libraries' sockets are pinned to. ``gather_facts`` reads what it needs from this machine. The launcher then
either binds the store's socket (exposure.py) or waits, bounded, until the store answers
(``wait_for_store``), else exits 3 naming the endpoint, the addresses tried and the port to open.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import time
from dataclasses import asdict, dataclass, replace
from typing import Callable, Mapping, Sequence

from ..errors import EnvironmentUnsupported, UsageError, invalid_choice
from ..basics.validators import split_endpoint

HOST_CHOICES = ("auto", "yes", "no")
CONNECT_ATTEMPT_S = 2.0  # one TCP connect; a firewall that drops packets shows as this timeout
RETRY_PAUSE_S = 0.5
# Answers from this machine's own network stack or its segment: waiting changes nothing.
_NO_ROUTE = {errno.ENETUNREACH: "no route to that network from this machine",
             errno.EHOSTUNREACH: "no machine answers at that address (host unreachable)",
             errno.EADDRNOTAVAIL: "the address cannot be used from this machine"}


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Endpoint:
        """HOST:PORT, NAME:PORT or [IPv6]:PORT (port 1-65535), else exit 2."""
        found = split_endpoint(text.strip())
        if found is None:
            raise UsageError("invalid-rdzv-endpoint",
                             f'--rdzv-endpoint "{text}" is not HOST:PORT (port 1-65535), e.g. node0:29400')
        return cls(*found)

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class NetworkFacts:
    """What this machine knows about the endpoint; gathered by ``gather_facts``, invented by tests."""

    resolved: tuple[str, ...]  # addresses HOST resolves to here, in the resolver's order
    interfaces: Mapping[str, tuple[str, ...]]  # interface name -> its addresses
    route_source: str | None = None  # the local address the kernel would send from toward HOST
    resolve_error: str | None = None


@dataclass(frozen=True)
class StorePlan:
    """Where this machine's part of the job meets the others."""

    endpoint: Endpoint
    hosts_store: bool
    bind_address: str | None  # hosting: the one address the store listens on
    connect_addresses: tuple[str, ...]  # where this machine's agent and ranks reach the store
    interface: str | None  # the interface that routes to the endpoint: the collectives' sockets
    node_address: str | None  # this machine's address on that interface
    decided_by: str  # why this machine hosts the store or not, in words
    notes: tuple[str, ...] = ()  # what a user should know (a loopback endpoint, an unrouted host)
    forced: bool = False  # --rdzv-host yes|no: the user decided, so a taken port is an error, not a hint

    @property
    def store_host(self) -> str:
        """The store's address as this machine reaches it: the one it listens on, when hosted here."""
        return self.bind_address if self.hosts_store else (self.connect_addresses or (self.endpoint.host,))[0]

    @property
    def store_address(self) -> str:
        return str(Endpoint(self.store_host, self.endpoint.port))

    def as_client(self, reason: str) -> StorePlan:
        """The same plan for a machine that found its store already hosted (two launchers on one machine)."""
        return replace(self, hosts_store=False, bind_address=None, decided_by=reason)

    def to_dict(self) -> dict:
        return {**asdict(self), "endpoint": str(self.endpoint)}


def decide(endpoint: Endpoint, facts: NetworkFacts, host_override: str = "auto") -> StorePlan:
    """Host the store or not, where, and through which interface, from facts only."""
    if host_override not in HOST_CHOICES:
        raise invalid_choice("rdzv_host", host_override, HOST_CHOICES)
    if not facts.resolved:
        raise _unresolved(endpoint, facts)
    local = [a for a in facts.resolved if _is_local(a, facts.interfaces)]
    on_route = {"interface": _interface_holding(facts.route_source, facts.interfaces),
                "node_address": facts.route_source, "notes": _notes(endpoint, facts, local)}
    if host_override == "no":
        return StorePlan(endpoint, False, None, facts.resolved, decided_by="--rdzv-host no: another machine hosts "
                         "the store", forced=True, **on_route)
    if local:
        why = (f"{endpoint.host} is {local[0]}, an address of this machine" if endpoint.host != local[0]
               else f"{local[0]} is an address of this machine")
        forced = host_override == "yes"
        return StorePlan(endpoint, True, local[0], (local[0],), decided_by=f"--rdzv-host yes ({why})" if forced
                         else why, forced=forced, **on_route)
    if host_override == "auto":
        mine = ", ".join(sorted(_all_addresses(facts.interfaces))) or "none"
        return StorePlan(endpoint, False, None, facts.resolved, decided_by=f"{_named(endpoint, facts.resolved)} is "
                         f"none of this machine's addresses ({mine})", **on_route)
    return _hosted_on_the_route(endpoint, facts, on_route)


def _hosted_on_the_route(endpoint: Endpoint, facts: NetworkFacts, on_route: dict) -> StorePlan:
    """--rdzv-host yes for an address this machine does not hold (a container reached through a forwarded port):
    listen on the address the kernel uses toward the endpoint, still one address."""
    if facts.route_source is None:
        raise EnvironmentUnsupported(
            "rdzv-host-no-address",
            f"--rdzv-host yes, but {_named(endpoint, facts.resolved)} is none of this machine's "
            f"addresses and no interface routes to it, so there is no address to host the store on",
            hint=f"name this machine's own address in --rdzv-endpoint, e.g. "
                 f"{_example_address(facts.interfaces)}:{endpoint.port}")
    return StorePlan(endpoint, True, facts.route_source, (facts.route_source,),
                     decided_by=f"--rdzv-host yes: {endpoint.host} is not an address of this machine, so the store "
                                f"listens on {facts.route_source}, the address that routes to it",
                     forced=True, **on_route)


def _unresolved(endpoint: Endpoint, facts: NetworkFacts) -> EnvironmentUnsupported:
    return EnvironmentUnsupported(
        "rdzv-endpoint-unresolved",
        f"the rendezvous endpoint {endpoint}: {endpoint.host} does not resolve on this machine"
        + (f" ({facts.resolve_error})" if facts.resolve_error else ""),
        hint="give the address of the machine that hosts the store (e.g. 10.0.0.1:PORT), or add the name "
             "to this machine's /etc/hosts or DNS")


def _named(endpoint: Endpoint, addresses: Sequence[str]) -> str:
    """HOST, with what it resolves to when that says more."""
    if tuple(addresses) == (endpoint.host,):
        return endpoint.host
    return f"{endpoint.host} ({', '.join(addresses)})"


def _notes(endpoint: Endpoint, facts: NetworkFacts, local: list[str]) -> tuple[str, ...]:
    notes = []
    if local and all(ipaddress.ip_address(a).is_loopback for a in local):
        notes.append(f"{endpoint.host} is a loopback address here ({local[0]}): only launchers on this machine can "
                     f"reach the store; for several machines name an address the others use")
    if facts.route_source is None:
        notes.append(f"no interface of this machine routes to {endpoint.host}: the collectives' sockets are not "
                     f"pinned")
    return tuple(notes)


def _is_local(address: str, interfaces: Mapping[str, tuple[str, ...]]) -> bool:
    # Linux answers on all of 127.0.0.0/8 through lo, not only on the addresses lo lists.
    return ipaddress.ip_address(address).is_loopback or address in _all_addresses(interfaces)


def _all_addresses(interfaces: Mapping[str, tuple[str, ...]]) -> set[str]:
    return {a for addresses in interfaces.values() for a in addresses}


def _interface_holding(address: str | None, interfaces: Mapping[str, tuple[str, ...]]) -> str | None:
    if address is None:
        return None
    for name, addresses in interfaces.items():
        if address in addresses:
            return name
    if ipaddress.ip_address(address).is_loopback:
        return next((n for n, a in interfaces.items() if any(ipaddress.ip_address(x).is_loopback for x in a)), None)
    return None


def _example_address(interfaces: Mapping[str, tuple[str, ...]]) -> str:
    usable = sorted(a for a in _all_addresses(interfaces) if not ipaddress.ip_address(a).is_loopback
                    and not ipaddress.ip_address(a).is_link_local)
    return usable[0] if usable else "ADDRESS"


def gather_facts(endpoint: Endpoint) -> NetworkFacts:
    """This machine's view of the endpoint: resolution, interface addresses, the route's source."""
    resolved, error = resolve(endpoint)
    return NetworkFacts(resolved, interface_addresses(), route_source(resolved, endpoint.port), error)


def resolve(endpoint: Endpoint) -> tuple[tuple[str, ...], str | None]:
    try:
        infos = socket.getaddrinfo(endpoint.host, endpoint.port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        return (), str(exc)
    addresses = (_plain(info[4][0]) for info in infos if info[0] in (socket.AF_INET, socket.AF_INET6))
    return tuple(dict.fromkeys(addresses)), None  # in the resolver's order, each once


def interface_addresses() -> dict[str, tuple[str, ...]]:
    import psutil

    return {name: tuple(_plain(a.address) for a in addresses if a.family in (socket.AF_INET, socket.AF_INET6))
            for name, addresses in psutil.net_if_addrs().items()}


def route_source(addresses: Sequence[str], port: int) -> str | None:
    """The local address the kernel picks toward the first routable address (a UDP connect sends nothing)."""
    for address in addresses:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            try:
                probe.connect((address, port))
            except OSError:
                continue
            return _plain(probe.getsockname()[0])
    return None


def _plain(address: str) -> str:
    return address.split("%")[0]  # an IPv6 scope ("fe80::1%eth0") is not part of the address


def plan_store(endpoint: str, host_override: str = "auto",
               gather: Callable[[Endpoint], NetworkFacts] = gather_facts) -> StorePlan:
    """``decide`` over this machine's facts."""
    parsed = Endpoint.parse(endpoint)
    return decide(parsed, gather(parsed), host_override)


@dataclass
class _Attempt:
    address: str
    reason: str = ""
    final: bool = False  # the network said no in a way waiting cannot change


@dataclass(frozen=True)
class StoreWait:
    """The outcome of ``wait_for_store``: the address that answered, how long it took."""

    address: str
    waited_s: float


class StoreWaitStopped(Exception):
    """A stop signal (Ctrl+C, SIGTERM) came while waiting for the store: nothing was started."""


def wait_for_store(plan: StorePlan, wait_s: float, connect: Callable[[str, int, float], None] | None = None,
                   clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                   stop_requested: Callable[[], str | None] = lambda: None) -> StoreWait:
    """Wait until the store answers at one of the plan's addresses; exit 3 when none does. A refused or silent
    connection is retried until ``wait_s`` (the host may start later); no route ends the wait at once, and so does
    a stop request (``stop_requested`` returns the signal's name). ``connect`` is the seam tests use."""
    connect = connect or _tcp_connect
    port = plan.endpoint.port
    start = clock()
    deadline = start + wait_s
    tries = 0
    while True:
        stop = stop_requested()
        if stop:
            raise StoreWaitStopped(f"{stop} while waiting for the store at {plan.endpoint}")
        tries += 1
        attempts = []
        for address in plan.connect_addresses:
            try:
                connect(address, port, max(0.1, min(CONNECT_ATTEMPT_S, deadline - clock())))
            except OSError as exc:
                attempts.append(_classify(address, exc))
                continue
            return StoreWait(address, clock() - start)
        if all(a.final for a in attempts) or clock() + RETRY_PAUSE_S >= deadline:
            raise _unreachable(plan, attempts, clock() - start, tries)
        sleep(RETRY_PAUSE_S)


def _tcp_connect(address: str, port: int, timeout_s: float) -> None:
    with socket.create_connection((address, port), timeout=timeout_s):
        pass


def _classify(address: str, exc: OSError) -> _Attempt:
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return _Attempt(address, f"no answer within {CONNECT_ATTEMPT_S:.0f} s (a firewall dropping packets?)")
    if exc.errno == errno.ECONNREFUSED:
        return _Attempt(address, "connection refused (nothing listens there yet)")
    if exc.errno in _NO_ROUTE:
        return _Attempt(address, _NO_ROUTE[exc.errno], final=True)
    return _Attempt(address, exc.strerror or str(exc))


def _unreachable(plan: StorePlan, attempts: list[_Attempt], waited_s: float, tries: int) -> EnvironmentUnsupported:
    tried = "; ".join(f"{Endpoint(a.address, plan.endpoint.port)}: {a.reason}" for a in attempts)
    via = f" through {plan.interface} ({plan.node_address})" if plan.interface else ""
    return EnvironmentUnsupported(
        "rdzv-endpoint-unreachable",
        f"nothing answers at the rendezvous endpoint {plan.endpoint} from this machine{via} after "
        f"{waited_s:.1f} s ({tries} attempt(s)); tried {tried}",
        hint=f"start ddplab first on the machine that has {plan.endpoint.host} (it hosts the store), check the "
             f"address, and open TCP port {plan.endpoint.port} on that machine; the ranks also connect to each other "
             f"on ports their collective library picks, so allow TCP between the machines' "
             f"{plan.interface or 'network'} interfaces")
