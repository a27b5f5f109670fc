"""How a launcher takes part in a job across machines: host the store, or find it hosted."""

import socket

import pytest

from ddplab.cluster import rendezvous
from ddplab.cluster.exposure import bind_loopback, host_or_reach
from ddplab.cluster.endpoint import plan_store
from ddplab.errors import EnvironmentUnsupported, ExitCode
from tests.conftest import free_loopback_port


def _listening_address(fd: int) -> tuple[str, int]:
    with socket.fromfd(fd, socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.getsockname()


def test_the_host_hands_elastic_a_socket_bound_to_the_endpoint_address_and_closes_it_after():
    port = free_loopback_port()
    with host_or_reach(plan_store(f"127.0.0.1:{port}"), wait_s=1) as meeting:
        fd = meeting.rdzv_configs[rendezvous.LISTEN_FD_KEY]
        assert _listening_address(fd) == ("127.0.0.1", port)
        assert meeting.rdzv_configs[rendezvous.STORE_HOST_KEY] == "127.0.0.1"
        assert meeting.store.hosts_store
    with socket.socket() as again:  # the launcher's socket is closed: the port is free again
        again.bind(("127.0.0.1", port))


def test_a_second_launcher_on_the_same_machine_joins_the_store_the_first_hosts():
    port = free_loopback_port()
    plan = plan_store(f"127.0.0.1:{port}")
    with host_or_reach(plan, wait_s=1), host_or_reach(plan, wait_s=1) as second:
        assert rendezvous.LISTEN_FD_KEY not in second.rdzv_configs
        assert second.rdzv_configs[rendezvous.STORE_HOST_KEY] == "127.0.0.1"
        assert not second.store.hosts_store
        assert "another launcher on this machine hosts it" in second.store.decided_by


def test_rdzv_host_yes_on_a_taken_port_is_exit_3():
    port = free_loopback_port()
    with socket.create_server(("127.0.0.1", port)):
        with pytest.raises(EnvironmentUnsupported) as caught:
            with host_or_reach(plan_store(f"127.0.0.1:{port}", "yes"), wait_s=1):
                pass
    assert caught.value.reference == "rdzv-store-cannot-listen" and caught.value.exit_code == ExitCode.ENVIRONMENT
    assert f"127.0.0.1:{port} is already in use" in caught.value.message


def test_rdzv_host_no_with_nobody_hosting_waits_then_names_the_endpoint():
    port = free_loopback_port()
    with pytest.raises(EnvironmentUnsupported) as caught:
        with host_or_reach(plan_store(f"127.0.0.1:{port}", "no"), wait_s=1):
            pass
    assert caught.value.reference == "rdzv-endpoint-unreachable"
    assert f"127.0.0.1:{port}" in caught.value.message and f"open TCP port {port}" in caught.value.hint


def test_across_machines_a_launcher_waits_for_the_store_to_serve_its_own_session():
    """A drill's sessions meet one after another on one endpoint: the machine that reaches the store must not
    join the previous session's store while its host is still closing it (issue 13)."""
    import threading
    import time
    from datetime import timedelta

    from torch.distributed import TCPStore

    port = free_loopback_port()
    listener = bind_loopback(port)
    server = TCPStore("127.0.0.1", port, None, True, timedelta(seconds=10), wait_for_workers=False,
                      master_listen_fd=__import__("os").dup(listener.fileno()))
    try:
        server.set(rendezvous.session_key("drill-stall-stall"), "open")  # the previous session's store
        marked = threading.Timer(1.0, lambda: server.set(rendezvous.session_key("drill-stall-blocking"), "open"))
        marked.start()
        start = time.monotonic()
        with host_or_reach(plan_store(f"127.0.0.1:{port}", "no"), wait_s=10, session="drill-stall-blocking"):
            waited = time.monotonic() - start
        marked.join()
        assert 0.9 <= waited < 5  # not before this session's mark, and soon after it
        with pytest.raises(EnvironmentUnsupported) as caught:
            with host_or_reach(plan_store(f"127.0.0.1:{port}", "no"), wait_s=1, session="another-job"):
                pass
        assert caught.value.reference == "rdzv-session-not-found" and "another-job" in caught.value.message
        assert "same --rdzv-endpoint and --rdzv-id" in caught.value.hint
    finally:
        del server
        listener.close()
