"""Which machine hosts a job's store, where it listens, and the error when nothing answers."""

import errno
import socket
import time

import pytest

from ddplab.cluster.endpoint import (
    Endpoint,
    NetworkFacts,
    StoreWaitStopped,
    decide,
    gather_facts,
    plan_store,
    wait_for_store,
)
from ddplab.cluster.exposure import StoreAddressInUse, bind_store_socket
from ddplab.errors import EnvironmentUnsupported, ExitCode, UsageError
from tests.conftest import free_loopback_port

# Two "machines" as in docs/background.md section 6: each sees only its own addresses.
MACHINE_A = {"lo": ("127.0.0.1", "::1"), "eth0": ("10.9.0.1", "fe80::1")}
MACHINE_B = {"lo": ("127.0.0.1", "::1"), "eth0": ("10.9.0.2",)}
ENDPOINT = Endpoint("10.9.0.1", 29400)


def _facts(interfaces, resolved=("10.9.0.1",), route_source="10.9.0.1"):
    return NetworkFacts(tuple(resolved), interfaces, route_source)


@pytest.mark.parametrize("text, parsed", [("node0:29400", Endpoint("node0", 29400)),
                                          ("10.9.0.1:1", Endpoint("10.9.0.1", 1)),
                                          ("[fd00::1]:29400", Endpoint("fd00::1", 29400))])
def test_endpoints_parse(text, parsed):
    assert Endpoint.parse(text) == parsed
    assert str(parsed) == text


@pytest.mark.parametrize("text", ["node0", "node0:", ":29400", "node0:0", "node0:65536", "node0:http"])
def test_a_bad_endpoint_is_refused_with_the_form_expected(text):
    with pytest.raises(UsageError) as caught:
        Endpoint.parse(text)
    assert caught.value.reference == "invalid-rdzv-endpoint" and "HOST:PORT" in caught.value.message


def test_the_machine_holding_the_address_hosts_the_store_there_only():
    plan = decide(ENDPOINT, _facts(MACHINE_A))
    assert plan.hosts_store and plan.bind_address == "10.9.0.1"
    assert plan.connect_addresses == ("10.9.0.1",) and plan.store_address == "10.9.0.1:29400"
    assert plan.interface == "eth0" and plan.node_address == "10.9.0.1"
    assert plan.decided_by == "10.9.0.1 is an address of this machine" and plan.notes == ()


def test_a_name_is_judged_by_its_address_not_by_the_hostname():
    # torch compares the endpoint with the hostname; in a namespace the hostname is "vm" on every
    # machine and resolves to 127.0.0.1, so nobody hosted the store (docs/background.md section 6)
    plan = decide(Endpoint("node-a", 29400), _facts(MACHINE_A))
    assert plan.hosts_store and plan.bind_address == "10.9.0.1"
    assert plan.decided_by == "node-a is 10.9.0.1, an address of this machine"


def test_the_other_machines_reach_it_through_the_interface_that_routes_there():
    plan = decide(ENDPOINT, _facts(MACHINE_B, route_source="10.9.0.2"))
    assert not plan.hosts_store and plan.bind_address is None
    assert plan.connect_addresses == ("10.9.0.1",) and plan.store_address == "10.9.0.1:29400"
    assert plan.interface == "eth0" and plan.node_address == "10.9.0.2"
    assert "10.9.0.1 is none of this machine's addresses (10.9.0.2, 127.0.0.1, ::1)" == plan.decided_by


def test_rdzv_host_no_keeps_the_holder_of_the_address_a_client():
    plan = decide(ENDPOINT, _facts(MACHINE_A), "no")
    assert not plan.hosts_store and plan.forced and plan.connect_addresses == ("10.9.0.1",)
    assert plan.decided_by.startswith("--rdzv-host no")


def test_rdzv_host_yes_on_the_holder_is_the_same_plan_but_forced():
    plan = decide(ENDPOINT, _facts(MACHINE_A), "yes")
    assert plan.hosts_store and plan.bind_address == "10.9.0.1" and plan.forced
    assert plan.decided_by == "--rdzv-host yes (10.9.0.1 is an address of this machine)"


def test_rdzv_host_yes_for_a_forwarded_address_listens_on_the_routed_address_not_everywhere():
    # a container whose endpoint is the host's address, forwarded to the container's own 172.17.0.2
    container = {"lo": ("127.0.0.1",), "eth0": ("172.17.0.2",)}
    plan = decide(Endpoint("192.0.2.10", 29400), _facts(container, ("192.0.2.10",), "172.17.0.2"), "yes")
    assert plan.hosts_store and plan.bind_address == "172.17.0.2" and plan.interface == "eth0"
    assert "the store listens on 172.17.0.2" in plan.decided_by


def test_rdzv_host_yes_without_any_route_is_exit_3_naming_the_addresses():
    with pytest.raises(EnvironmentUnsupported) as caught:
        decide(Endpoint("192.0.2.10", 29400), _facts(MACHINE_B, ("192.0.2.10",), None), "yes")
    assert caught.value.reference == "rdzv-host-no-address" and caught.value.exit_code == ExitCode.ENVIRONMENT
    assert "192.0.2.10" in caught.value.message and "10.9.0.2:29400" in caught.value.hint


def test_an_endpoint_that_does_not_resolve_is_exit_3_naming_it():
    facts = NetworkFacts((), MACHINE_B, None, "[Errno -2] Name or service not known")
    with pytest.raises(EnvironmentUnsupported) as caught:
        decide(Endpoint("node-z", 29400), facts)
    assert caught.value.reference == "rdzv-endpoint-unresolved" and caught.value.exit_code == ExitCode.ENVIRONMENT
    assert "node-z:29400" in caught.value.message and "Name or service not known" in caught.value.message


def test_a_loopback_endpoint_is_hosted_but_said_to_be_reachable_from_this_machine_only():
    # a hostname that resolves to 127.0.0.1 here: the other machines could never reach the store
    plan = decide(Endpoint("vm", 29400), _facts(MACHINE_A, ("127.0.0.1",), "127.0.0.1"))
    assert plan.hosts_store and plan.bind_address == "127.0.0.1" and plan.interface == "lo"
    assert len(plan.notes) == 1 and "only launchers on this machine can reach the store" in plan.notes[0]


def test_an_unknown_override_names_the_choices():
    with pytest.raises(UsageError) as caught:
        decide(ENDPOINT, _facts(MACHINE_A), "maybe")
    assert caught.value.reference == "invalid-rdzv-host" and "auto, yes, no" in caught.value.message


def test_this_machines_facts_for_a_loopback_endpoint():
    facts = gather_facts(Endpoint("127.0.0.1", 29400))
    assert facts.resolved == ("127.0.0.1",) and facts.route_source == "127.0.0.1"
    assert "127.0.0.1" in {a for addresses in facts.interfaces.values() for a in addresses}
    plan = plan_store("127.0.0.1:29400")
    assert plan.hosts_store and plan.interface is not None


def _plan(host_addresses=("10.9.0.1",), port=29400, interface="eth0"):
    return decide(Endpoint(host_addresses[0], port),
                  _facts(MACHINE_B, host_addresses, "10.9.0.2" if interface else None))


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_waiting_retries_a_refused_connection_until_the_host_starts():
    clock = _Clock()
    answers = iter([ConnectionRefusedError(errno.ECONNREFUSED, "refused")] * 3 + [None])

    def connect(address, port, timeout):
        clock.now += 0.01
        answer = next(answers)
        if answer is not None:
            raise answer

    waited = wait_for_store(_plan(), 60, connect, clock, clock.sleep)
    assert waited.address == "10.9.0.1" and 1.5 <= waited.waited_s <= 1.6  # three pauses of 0.5 s


def test_nothing_answering_within_the_bound_is_exit_3_naming_endpoint_addresses_and_port():
    clock = _Clock()

    def refused(address, port, timeout):
        clock.now += 0.01
        raise ConnectionRefusedError(errno.ECONNREFUSED, "refused")

    with pytest.raises(EnvironmentUnsupported) as caught:
        wait_for_store(_plan(("10.9.0.1", "10.9.1.1")), 5, refused, clock, clock.sleep)
    error = caught.value
    assert error.reference == "rdzv-endpoint-unreachable" and error.exit_code == ExitCode.ENVIRONMENT
    assert 4.5 <= clock.now <= 5.0  # bounded by the wait asked for
    assert "nothing answers at the rendezvous endpoint 10.9.0.1:29400 from this machine through eth0 (10.9.0.2)" \
        in error.message
    assert ("tried 10.9.0.1:29400: connection refused (nothing listens there yet); "
            "10.9.1.1:29400: connection refused") in error.message
    assert "open TCP port 29400" in error.hint


def test_no_route_ends_the_wait_at_once():
    clock = _Clock()
    calls = []

    def unreachable(address, port, timeout):
        calls.append(address)
        raise OSError(errno.EHOSTUNREACH, "No route to host")

    with pytest.raises(EnvironmentUnsupported) as caught:
        wait_for_store(_plan(), 120, unreachable, clock, clock.sleep)
    assert calls == ["10.9.0.1"] and clock.now == 0.0
    assert "10.9.0.1:29400: no machine answers at that address (host unreachable)" in caught.value.message


def test_a_silent_address_is_retried_and_named_as_such():
    clock = _Clock()

    def silent(address, port, timeout):
        clock.now += timeout
        raise socket.timeout("timed out")

    with pytest.raises(EnvironmentUnsupported) as caught:
        wait_for_store(_plan(), 5, silent, clock, clock.sleep)
    assert "no answer within 2 s (a firewall dropping packets?)" in caught.value.message
    assert "(2 attempt(s))" in caught.value.message


def test_waiting_for_a_real_closed_port_is_bounded_and_a_real_listener_answers():
    port = free_loopback_port()
    plan = plan_store(f"127.0.0.1:{port}", "no")
    start = time.monotonic()
    with pytest.raises(EnvironmentUnsupported) as caught:
        wait_for_store(plan, 1.0)
    assert time.monotonic() - start < 3.0
    assert f"127.0.0.1:{port}: connection refused" in caught.value.message
    with socket.create_server(("127.0.0.1", port)):
        assert wait_for_store(plan, 1.0).address == "127.0.0.1"


def test_the_store_socket_listens_on_the_plans_address_only():
    port = free_loopback_port()
    plan = plan_store(f"127.0.0.1:{port}")
    with bind_store_socket(plan) as sock:
        assert sock.getsockname() == ("127.0.0.1", port)  # not 0.0.0.0: one address
        with pytest.raises(StoreAddressInUse):
            bind_store_socket(plan)


def test_an_address_this_machine_does_not_hold_cannot_be_listened_on_exit_3():
    # --rdzv-host yes for an address routed elsewhere, forced onto a plan that binds it
    plan = decide(Endpoint("192.0.2.10", 29400), _facts({"lo": ("127.0.0.1",), "eth0": ("192.0.2.10",)},
                                                        ("192.0.2.10",), "192.0.2.10"))
    with pytest.raises(EnvironmentUnsupported) as caught:
        bind_store_socket(plan)
    assert caught.value.reference == "rdzv-store-cannot-listen" and "192.0.2.10:29400" in caught.value.message


def test_a_stop_request_ends_the_wait_before_the_next_attempt():
    clock, calls, stops = _Clock(), [], iter([None, None, "SIGINT", "SIGINT"])

    def refused(address, port, timeout):
        calls.append(address)
        raise ConnectionRefusedError(errno.ECONNREFUSED, "refused")

    with pytest.raises(StoreWaitStopped) as caught:
        wait_for_store(_plan(), 120, refused, clock, clock.sleep, stop_requested=lambda: next(stops))
    assert calls == ["10.9.0.1", "10.9.0.1"] and clock.now == 1.0
    assert str(caught.value) == "SIGINT while waiting for the store at 10.9.0.1:29400"
