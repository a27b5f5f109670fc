"""Where a run listens, decided from facts."""

from ddplab.exposure import plan, where_to_listen
from ddplab.platform.vendors import HOST_CPU, VENDORS, socket_interface_envs

ONE_MACHINE = dict(nnodes=1, endpoint="127.0.0.1:0", loopback_interface="lo")


def test_one_machine_pins_every_socket_variable_to_loopback():
    e = plan(**ONE_MACHINE, socket_variables=("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"), environ={},
             store_unsupported=None)
    assert e.loopback_only and e.loopback_store
    assert e.environment() == {"NCCL_SOCKET_IFNAME": "lo", "GLOO_SOCKET_IFNAME": "lo"}
    assert e.listening_at(4242).to_dict()["store"] == "127.0.0.1:4242"
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
