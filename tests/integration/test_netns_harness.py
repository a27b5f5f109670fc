"""The test harness's machines (tests/netns.py): separate addresses, a cable to pull, nothing left."""

import subprocess
import sys

import pytest

from tests.netns import machines, machines_or_skip  # noqa: F401 (machines: a fixture)

# One machine listens, another connects: the program both run.
ECHO = """
import socket, sys
if sys.argv[1] == "serve":
    with socket.create_server((sys.argv[2], 7000)) as s:
        print("ready", flush=True)
        conn, peer = s.accept()
        print(peer[0], flush=True)
else:
    try:
        socket.create_connection((sys.argv[2], 7000), timeout=float(sys.argv[3])).close()
        print("connected")
    except OSError as exc:
        print(type(exc).__name__)
"""


def _namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def _addresses(machine) -> set[str]:
    out = machine.run(["ip", "-o", "addr", "show"]).stdout
    return {line.split()[3].split("/")[0] for line in out.splitlines()}


def test_machines_reach_each_other_by_address_and_the_host_sees_none_of_it(machines):
    a, b = machines(2)
    assert (a.address, b.address) == ("10.9.0.1", "10.9.0.2")
    assert {"10.9.0.1", "127.0.0.1"} <= _addresses(a) and "10.9.0.2" not in _addresses(a)
    host = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True).stdout
    assert "10.9.0." not in host
    server = a.popen([sys.executable, "-c", ECHO, "serve", a.address], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "ready"
        assert b.run([sys.executable, "-c", ECHO, "connect", a.address, "5"]).stdout.strip() == "connected"
        assert server.stdout.readline().strip() == "10.9.0.2"  # the peer came from the other machine
    finally:
        server.kill()
        server.wait()


def test_a_pulled_cable_cuts_the_machine_off_until_it_is_put_back(machines):
    a, b = machines(2)
    probe = [sys.executable, "-c", ECHO, "connect", a.address, "1"]
    b.disconnect()
    assert b.run(probe).stdout.strip() in {"TimeoutError", "OSError"}  # nothing answers: not "refused"
    b.connect()
    assert b.run(probe).stdout.strip() == "ConnectionRefusedError"  # a reaches again; nobody listens


def test_three_machines_share_one_switch(machines):
    group = machines(3)
    c = group[2]
    assert c.address == "10.9.0.3"
    assert c.run([sys.executable, "-c", ECHO, "connect", group[0].address, "3"]).stdout.strip() == \
        "ConnectionRefusedError"  # reached 10.9.0.1 through the switch


def test_two_groups_at_once_do_not_collide_and_everything_is_gone_after_a_failure():
    with pytest.raises(RuntimeError):
        with machines_or_skip(2) as first, machines_or_skip(2) as second:
            made = {m.namespace for m in [*first, *second]} | {first.switch, second.switch}
            assert len(made) == 6 and made <= _namespaces()
            sleeper = second[0].popen([sys.executable, "-c", "import time; time.sleep(300)"])
            raise RuntimeError("the test failed")
    assert not made & _namespaces()
    assert sleeper.wait(timeout=10) != 0  # ended by the teardown, not left running


def test_entering_a_group_again_reuses_its_machines():
    with machines_or_skip(2) as group:
        names = [m.namespace for m in group]
        with group:  # as a script does after probing whether namespaces can be made
            assert [m.namespace for m in group] == names
        assert not set(names) & _namespaces()  # the inner block's exit tore them down
