"""The store ddplab serves on a socket it bound: torch's libuv store where it takes one, the legacy store before."""

import os
from datetime import timedelta

import psutil
import pytest
from torch.distributed import TCPStore

from ddplab.cluster import rendezvous
from ddplab.cluster.exposure import bind_loopback
from tests.conftest import connections


def _listening_ports() -> set[tuple[str, int]]:
    conns = connections(psutil.Process())
    return {(c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN}


@pytest.mark.parametrize("legacy", [True, False], ids=["legacy", "libuv"])
def test_the_store_serves_on_the_loopback_socket_it_is_handed_and_nowhere_else(legacy):
    before = _listening_ports()
    listener = bind_loopback()
    port = listener.getsockname()[1]
    server = rendezvous.serve_on(os.dup(listener.fileno()), "127.0.0.1", port, timedelta(seconds=10), legacy=legacy)
    try:
        # asked for libuv on a torch whose libuv store refuses a socket: the legacy store took it instead
        assert server.libuvBackend is (not legacy and rendezvous.libuv_takes_listen_fd())
        client = TCPStore("127.0.0.1", port, None, False, timedelta(seconds=10))
        client.set("ddplab/test", "served")
        assert server.get("ddplab/test") == b"served"
        # the one new listening socket is the launcher's, on 127.0.0.1: the store opened none on another address
        assert _listening_ports() - before == {("127.0.0.1", port)}
    finally:
        del server
        listener.close()


@pytest.mark.parametrize(("version", "takes"), [
    ("2.4.1+cu121", False), ("2.5.1", False), ("2.7.1+cu126", False),  # 2.5.1 and 2.7.1: NotImplementedError
    ("2.8.0", False),  # pytorch added it in 2.8; not measured here, so 2.8 keeps the legacy store
    ("2.9.0a0+gitabc", True), ("2.9.1", True), ("2.13.0+cpu", True), ("2.15.0", True), ("3.0.0", True),
])
def test_the_libuv_store_is_used_from_the_first_release_measured_to_take_a_socket(version, takes):
    assert rendezvous.libuv_takes_listen_fd(version) is takes


def test_this_torch_chooses_by_its_own_version():
    listener = bind_loopback()
    port = listener.getsockname()[1]
    server = rendezvous.serve_on(os.dup(listener.fileno()), "127.0.0.1", port, timedelta(seconds=10))
    try:
        server.set("k", "v")
        assert TCPStore("127.0.0.1", port, None, False, timedelta(seconds=10)).get("k") == b"v"
        assert server.libuvBackend is rendezvous.libuv_takes_listen_fd()
    finally:
        del server
        listener.close()
