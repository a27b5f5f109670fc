"""Rendezvous handlers whose store listens on a socket ddplab bound: loopback for one machine, the endpoint's own
address for a job across machines.

torch's TCPStore listens on every interface whatever host it is given, and elastic's c10d rendezvous starts two of
them. On one machine the launcher binds a socket to 127.0.0.1 itself (exposure.py), the agent's TCPStore serves on it
(``master_listen_fd``), and the ranks reuse the agent's store (``use_agent_store``) rather than rank 0 hosting
another one (docs/exposure.md). Across machines (``ddplab-c10d``) torch's own dynamic rendezvous runs over a store
that the machine holding the endpoint's address hosts on that address only; every machine's ranks reuse it.

Imported only when ``exposure.loopback_store_unsupported()`` says this torch has the parts.
"""

from __future__ import annotations

import contextlib
import os
import socket
from datetime import timedelta

from torch.distributed import PrefixStore, TCPStore
from torch.distributed.elastic.rendezvous import (
    RendezvousHandler,
    RendezvousInfo,
    RendezvousParameters,
    RendezvousStoreInfo,
    rendezvous_handler_registry,
)

from ..basics.env_vars import environ_set

BACKEND_NAME = "ddplab-loopback"
ACROSS_MACHINES_BACKEND = "ddplab-c10d"
# Registered in elastic's registry when ddplab launches a job, for its own launches only: never a choice for a
# user's --rdzv-backend (job/torchrun_args.py), even in a process that ran a job before.
OWN_BACKENDS = (BACKEND_NAME, ACROSS_MACHINES_BACKEND)
LISTEN_FD_KEY = "listen_fd"  # rendezvous config entry: the socket the launcher bound
STORE_HOST_KEY = "store_host"  # rendezvous config entry: the store's address as this machine reaches it
_DEFAULT_TIMEOUT_S = 600.0
_STORE_READ_TIMEOUT_S = 60  # torch's c10d rendezvous default for store operations
# torch's dynamic rendezvous opt-out of the second store (documented in its dynamic_rendezvous.py).
_NO_SHARED_STORE_ENV = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"
# Stores this machine hosts for a job across machines, by the launcher's listening socket: kept until the
# launcher leaves the meeting, so that the other machines' ranks and supervisors can still read and write
# the job's last words after elastic let go of its handler (launch.py waits for them when a job fails).
_HOSTED: dict[int, TCPStore] = {}
SESSION_KEY_ROOT = "ddplab/session"
LIBUV_LISTEN_FD_SINCE = (2, 9)  # the oldest torch measured whose libuv store serves a socket it is handed


class LoopbackRendezvous(RendezvousHandler):
    """This machine is the whole job (group rank 0 of 1): the handler only owns the store."""

    def __init__(self, run_id: str, store: TCPStore, host: str):
        self._run_id = run_id
        self._store: TCPStore | None = store
        self._host = host  # the loopback address the launcher bound the store's socket to
        self._closed = False

    def get_backend(self) -> str:
        return BACKEND_NAME

    @property
    def use_agent_store(self) -> bool:
        # The ranks connect to this store as clients; otherwise rank 0 would host another, on every interface.
        return True

    def next_rendezvous(self) -> RendezvousInfo:
        if self._store is None:
            raise RuntimeError(f"rendezvous {self._run_id} was shut down")
        return RendezvousInfo(PrefixStore(self._run_id, self._store), 0, 1,
                              RendezvousStoreInfo(self._host, self._store.port))

    def is_closed(self) -> bool:
        return self._closed

    def set_closed(self) -> None:
        self._closed = True

    def num_nodes_waiting(self) -> int:
        return 0  # nobody else can join a one-machine job

    def get_run_id(self) -> str:
        return self._run_id

    def shutdown(self) -> bool:
        self._closed = True
        self._store = None  # the server stops once the agent drops its reference too
        return True


def create_handler(params: RendezvousParameters) -> LoopbackRendezvous:
    """Elastic calls this with the launch's rendezvous parameters (registry contract)."""
    listen_fd = params.get(LISTEN_FD_KEY)
    if listen_fd is None:
        raise ValueError(f"the {BACKEND_NAME} rendezvous needs {LISTEN_FD_KEY}: a socket bound to loopback")
    timeout = timedelta(seconds=float(params.get("timeout", _DEFAULT_TIMEOUT_S)))
    # The store closes the descriptor it is given, so it gets its own copy; the launcher closes the original.
    own_fd = os.dup(int(listen_fd))
    with socket.fromfd(own_fd, socket.AF_INET, socket.SOCK_STREAM) as sock:  # a duplicate, closed here
        host, port = sock.getsockname()
    return LoopbackRendezvous(params.run_id, serve_on(own_fd, host, port, timeout), host)


def serve_on(listen_fd: int, host: str, port: int, timeout: timedelta, legacy: bool | None = None) -> TCPStore:
    """A store server on the socket ``listen_fd``, which ddplab bound (the store owns it and closes it). torch's
    libuv store refuses a socket it is handed before 2.8; there the legacy store serves it (``use_libuv=False``).
    ``legacy``: None lets this torch's version decide (``libuv_takes_listen_fd``); tests force either."""
    if legacy is None:
        legacy = not libuv_takes_listen_fd()
    if not legacy:
        # A build between the releases measured refuses before it touches the socket.
        with contextlib.suppress(NotImplementedError):
            return TCPStore(host, port, None, True, timeout, wait_for_workers=False, master_listen_fd=listen_fd)
    return TCPStore(host, port, None, True, timeout, wait_for_workers=False, master_listen_fd=listen_fd,
                    use_libuv=False)


def libuv_takes_listen_fd(version: str | None = None) -> bool:
    """Whether this torch's libuv store serves a socket it is handed: added in 2.8, but 2.9.1 is the oldest release
    measured to do so, so 2.8 keeps the legacy store too."""
    import torch

    from ..basics.torch_floor import release

    found = release(str(torch.__version__) if version is None else version)
    return found is not None and found >= LIBUV_LISTEN_FD_SINCE


def register() -> str:
    """Make the handler known to elastic (idempotent); returns the backend name to launch with."""
    rendezvous_handler_registry.register(BACKEND_NAME, create_handler)
    return BACKEND_NAME


# --- several machines --------------------------------------------------------------------------


class AcrossMachinesRendezvous(RendezvousHandler):
    """torch's dynamic rendezvous over a store ddplab placed; the ranks reuse that store."""

    def __init__(self, inner: RendezvousHandler, store: TCPStore, store_info: RendezvousStoreInfo):
        self._inner = inner
        self._store: TCPStore | None = store  # held so the server lives as long as the handler
        self._store_info = store_info

    def get_backend(self) -> str:
        return ACROSS_MACHINES_BACKEND

    @property
    def use_agent_store(self) -> bool:
        return True

    def next_rendezvous(self) -> RendezvousInfo:
        # Asked to share its store, torch's handler would have group rank 0 host a second one on every interface;
        # with the opt-out it only publishes rank 0's address. The ranks are sent to this machine's store instead.
        with environ_set({_NO_SHARED_STORE_ENV: "1"}):
            info = self._inner.next_rendezvous()
        return RendezvousInfo(info.store, info.rank, info.world_size, self._store_info)

    def is_closed(self) -> bool:
        return self._inner.is_closed()

    def set_closed(self) -> None:
        self._inner.set_closed()

    def num_nodes_waiting(self) -> int:
        return self._inner.num_nodes_waiting()

    def get_run_id(self) -> str:
        return self._inner.get_run_id()

    def shutdown(self) -> bool:
        try:
            return self._inner.shutdown()
        finally:
            self._store = None


def across_machines_handler(params: RendezvousParameters) -> AcrossMachinesRendezvous:
    """Elastic calls this with the launch's rendezvous parameters. With ``listen_fd`` this machine hosts the store
    on that socket; without it, it connects to ``store_host`` (the address ``wait_for_store`` found answering)."""
    from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler as dynamic_handler

    from .endpoint import Endpoint

    store_host = params.get(STORE_HOST_KEY)
    if not store_host:
        raise ValueError(f"the {ACROSS_MACHINES_BACKEND} rendezvous needs {STORE_HOST_KEY}: where the store is")
    port = Endpoint.parse(params.endpoint).port
    timeout = timedelta(seconds=params.get_as_int("read_timeout", _STORE_READ_TIMEOUT_S))
    listen_fd = params.get(LISTEN_FD_KEY)
    if listen_fd is not None:
        own_fd = os.dup(int(listen_fd))  # the store closes what it is given; the launcher closes the original
        store = serve_on(own_fd, store_host, port, timeout)
        _HOSTED[int(listen_fd)] = store  # served until the launcher leaves the meeting, not only while elastic holds it
        store.set(session_key(params.run_id), "open")  # the other machines wait for this launch's, not an earlier
    else:
        store = TCPStore(store_host, port, None, False, timeout)
    inner = dynamic_handler(store, C10dRendezvousBackend(store, params.run_id), params)
    return AcrossMachinesRendezvous(inner, store, RendezvousStoreInfo(store_host, port))


def register_across_machines() -> str:
    """Make the across-machines handler known to elastic (idempotent); returns its backend name."""
    rendezvous_handler_registry.register(ACROSS_MACHINES_BACKEND, across_machines_handler)
    return ACROSS_MACHINES_BACKEND


def session_key(session: str) -> str:
    """The key the hosting launcher sets in its store as soon as it serves ``session`` (a rendezvous run id)."""
    return f"{SESSION_KEY_ROOT}/{session}"


def stop_hosting(listen_fd: int) -> None:
    """The launcher leaves the meeting: the store it hosted on ``listen_fd`` stops once nothing else holds it."""
    _HOSTED.pop(listen_fd, None)
