"""Where a run listens, decided from facts."""

from ddplab.cluster.endpoint import Endpoint, NetworkFacts, decide
from ddplab.cluster.exposure import NODE_ADDRESS_ENV, across_machines, plan, where_to_listen
from ddplab.platform.vendors import HOST_CPU, VENDORS, socket_interface_envs
from ddplab.basics.rundir import STATUS_STORE_ENV

ONE_MACHINE = dict(nnodes=1, endpoint="127.0.0.1:0", loopback_interface="lo")


def test_one_machine_pins_every_socket_variable_to_loopback():
    e = plan(**ONE_MACHINE, socket_variables=("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"), environ={},
             store_unsupported=None)
    assert e.loopback_only and e.loopback_store
    assert e.environment() == {"NCCL_SOCKET_IFNAME": "lo", "GLOO_SOCKET_IFNAME": "lo"}
    assert e.listening_at(4242).to_dict()["store"] == "127.0.0.1:4242"
    assert (e.listening_at(4242).to_dict()["address"], e.listening_at(4242).to_dict()["port"]) == ("127.0.0.1", 4242)
    assert e.listening_at(4242).summary() == ("loopback only: rendezvous store 127.0.0.1:4242; collectives "
                                              "NCCL_SOCKET_IFNAME=lo, GLOO_SOCKET_IFNAME=lo")


def test_a_variable_the_user_set_is_kept_and_loopback_is_not_claimed():
    e = plan(**ONE_MACHINE, socket_variables=("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"),
             environ={"GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "=lo"}, store_unsupported=None)
    assert e.environment() == {}  # ddplab overrides nothing the user chose
    assert not e.loopback_only
    assert [p.loopback for p in e.sockets] == [True, False]  # "=lo" is the exact-match form of lo
    assert e.summary().startswith("NOT loopback only")
    assert "You set GLOO_SOCKET_IFNAME=eth0" in e.summary()


def test_a_torch_without_the_parts_is_said_not_claimed():
    reason = "torch 2.3.1 has no RendezvousInfo, so its rendezvous store listens on every interface."
    e = plan(**ONE_MACHINE, socket_variables=("GLOO_SOCKET_IFNAME",), environ={}, store_unsupported=reason)
    assert not e.loopback_store and not e.loopback_only
    assert e.environment() == {"GLOO_SOCKET_IFNAME": "lo"}  # the collectives are still pinned
    assert e.to_dict()["why_not"] == [reason]
    assert "every interface" in e.store


def test_several_machines_keep_the_network_and_say_so():
    e = plan(nnodes=2, endpoint="node0:29400", socket_variables=("GLOO_SOCKET_IFNAME",), environ={},
             loopback_interface="lo", store_unsupported=None)
    assert not e.loopback_only and e.environment() == {}
    assert "node0:29400" in e.store and "every interface" in e.summary()


def test_this_torch_has_the_parts_for_a_loopback_store():
    e = where_to_listen(1, "127.0.0.1:0", "cpu", environ={})
    assert e.loopback_store, e.why_not
    assert e.loopback_only


def test_each_vendor_pins_its_library_and_gloo():
    assert socket_interface_envs(VENDORS["cuda"]) == ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
    assert socket_interface_envs(HOST_CPU) == ("GLOO_SOCKET_IFNAME",)
    assert socket_interface_envs(VENDORS["xpu"]) == ("GLOO_SOCKET_IFNAME",)  # oneCCL's knob is not verified


# --- several machines (cluster/endpoint.py decides; exposure records) ---------------------------

MACHINE_A = {"lo": ("127.0.0.1",), "eth0": ("10.9.0.1",)}
MACHINE_B = {"lo": ("127.0.0.1",), "eth0": ("10.9.0.2",)}
VARIABLES = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")


def _across(interfaces, route_source, environ=None):
    store = decide(Endpoint("10.9.0.1", 29400), NetworkFacts(("10.9.0.1",), interfaces, route_source))
    return across_machines(store, VARIABLES, environ or {}, "lo")


def test_the_hosting_machine_records_the_one_address_its_store_listens_on():
    e = _across(MACHINE_A, "10.9.0.1")
    d = e.to_dict()
    assert d["address"] == "10.9.0.1" and d["port"] == 29400
    assert d["single_machine"] is False and d["loopback_only"] is False
    assert d["store"] == "10.9.0.1:29400 (hosted by this machine, listening on 10.9.0.1 only)"
    assert d["across_machines"]["hosts_store"] is True and d["across_machines"]["interface"] == "eth0"
    assert e.summary() == ("across machines: rendezvous store 10.9.0.1:29400 (hosted by this machine, listening on "
                           "10.9.0.1 only); collectives NCCL_SOCKET_IFNAME=eth0, GLOO_SOCKET_IFNAME=eth0")


def test_every_machine_pins_the_collectives_to_the_interface_that_routes_to_the_endpoint():
    e = _across(MACHINE_B, "10.9.0.2")
    assert e.environment() == {"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0",
                               NODE_ADDRESS_ENV: "10.9.0.2",
                               STATUS_STORE_ENV: "10.9.0.1:29400"}  # where its ranks publish their status
    assert e.to_dict()["address"] == "10.9.0.1"  # where this machine reaches the store
    assert e.store == "10.9.0.1:29400 (hosted by another launcher; reached at 10.9.0.1:29400)"


def test_across_machines_a_socket_variable_the_user_set_is_kept_and_said():
    e = _across(MACHINE_B, "10.9.0.2", {"GLOO_SOCKET_IFNAME": "ib0"})
    assert e.environment() == {"NCCL_SOCKET_IFNAME": "eth0", NODE_ADDRESS_ENV: "10.9.0.2",
                               STATUS_STORE_ENV: "10.9.0.1:29400"}
    assert "You set GLOO_SOCKET_IFNAME=ib0: the ranks' collective sockets listen there, not on eth0" in e.summary()


def test_a_launcher_that_finds_the_store_hosted_records_itself_as_a_client():
    e = _across(MACHINE_A, "10.9.0.1")
    joined = e.meeting_through(e.across.as_client("another launcher here hosts it"))
    assert joined.to_dict()["across_machines"]["hosts_store"] is False
    assert joined.to_dict()["address"] == "10.9.0.1"
    assert "hosted by another launcher" in joined.store
