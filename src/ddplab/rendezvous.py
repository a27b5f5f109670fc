"""A rendezvous for one machine whose only store listens on loopback.

torch's TCPStore listens on every interface whatever host it is given, and elastic's c10d
rendezvous starts two of them (its own and the one it shares with the ranks). A run on one
machine has nobody to meet over the network, so ddplab registers this handler with elastic's
public rendezvous registry instead: the launcher binds a socket to 127.0.0.1 itself, the
agent's TCPStore serves on that socket (``master_listen_fd``), and the ranks reuse the agent's
store (``use_agent_store``) rather than rank 0 hosting another one. See docs/exposure.md.

Imported only when ``exposure.loopback_store_unsupported()`` says this torch has the parts.
"""

from __future__ import annotations

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

BACKEND_NAME = "ddplab-loopback"
LOOPBACK_HOST = "127.0.0.1"
LISTEN_FD_KEY = "listen_fd"  # rendezvous config entry: the socket the launcher bound
_DEFAULT_TIMEOUT_S = 600.0


def bind_loopback(port: int = 0) -> socket.socket:
    """A listening TCP socket on 127.0.0.1 (port 0: a free one). The caller closes it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as TCPStore's own server does
        sock.bind((LOOPBACK_HOST, port))
        sock.listen(socket.SOMAXCONN)
    except OSError:
        sock.close()
        raise
    return sock


class LoopbackRendezvous(RendezvousHandler):
    """This machine is the whole job (group rank 0 of 1): the handler only owns the store."""

    def __init__(self, run_id: str, store: TCPStore):
        self._run_id = run_id
        self._store: TCPStore | None = store
        self._closed = False

    def get_backend(self) -> str:
        return BACKEND_NAME

    @property
    def use_agent_store(self) -> bool:
        # The ranks connect to this store as clients; otherwise rank 0 would host another
        # store, listening on every interface.
        return True

    def next_rendezvous(self) -> RendezvousInfo:
        if self._store is None:
            raise RuntimeError(f"rendezvous {self._run_id} was shut down")
        return RendezvousInfo(PrefixStore(self._run_id, self._store), 0, 1,
                              RendezvousStoreInfo(LOOPBACK_HOST, self._store.port))

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
    # The store closes the descriptor it is given, so it gets its own copy; the launcher
    # keeps and closes the original.
    own_fd = os.dup(int(listen_fd))
    store = TCPStore(LOOPBACK_HOST, _port_of(own_fd), None, True, timeout, wait_for_workers=False,
                     master_listen_fd=own_fd)
    return LoopbackRendezvous(params.run_id, store)


def _port_of(fd: int) -> int:
    with socket.fromfd(fd, socket.AF_INET, socket.SOCK_STREAM) as sock:  # a duplicate, closed here
        return sock.getsockname()[1]


def register() -> str:
    """Make the handler known to elastic (idempotent); returns the backend name to launch with."""
    rendezvous_handler_registry.register(BACKEND_NAME, create_handler)
    return BACKEND_NAME
