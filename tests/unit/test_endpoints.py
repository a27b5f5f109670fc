"""HOST:PORT as every option and variable that names one reads it (basics/validators.py): the rendezvous endpoint,
the RAS address, a store's port."""

import pytest

from ddplab.basics.validators import is_endpoint, port_number, split_endpoint


@pytest.mark.parametrize("text, expected", [
    ("node0:29400", ("node0", 29400)), ("[::1]:28028", ("::1", 28028)), ("10.0.0.1:1", ("10.0.0.1", 1)),
    ("h:65535", ("h", 65535)),
    ("h:0", None), ("h:65536", None), ("h:٢٩٤٠٠", None), ("h:²", None), (":29400", None), ("h", None),
    ("h:", None), ("h:123456", None), ("[]:80", None),
])
def test_an_endpoint_is_a_host_and_a_port_from_1_to_65535_in_the_digits_0_to_9(text, expected):
    assert split_endpoint(text) == expected
    assert is_endpoint(text) is (expected is not None)


def test_a_port_that_is_not_a_plain_number_is_0():
    assert [port_number(t) for t in ("29400", "0", "٢٩٤٠٠", "", "123456", "-1")] == [29400, 0, 0, 0, 0, 0]
