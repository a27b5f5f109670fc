"""Sweep sizes that no run can use: a non-finite factor, a list too long to build, a size
beyond any memory. Refused at once, with the count or the value."""

import time

import pytest

from ddplab.errors import UsageError
from ddplab.basics.sizes import MAX_SIZES, estimate_size_count, parse_size, size_range


@pytest.mark.parametrize("factor", [float("nan"), float("inf"), float("-inf"), 1.0, 0.5, 2.0**21])
def test_a_step_factor_outside_1_to_2_pow_20_is_refused(factor):
    with pytest.raises(UsageError) as err:
        size_range("8", "1M", factor)
    assert err.value.reference == "invalid-step-factor" and f"-f {factor}" in err.value.message


@pytest.mark.timeout(10)  # the old code took 25 s and more to build this list
def test_too_many_sizes_is_refused_at_once_with_the_count():
    started = time.monotonic()
    with pytest.raises(UsageError) as err:
        size_range("8", "1G", 1.0000001)
    assert time.monotonic() - started < 1
    assert err.value.reference == "too-many-sizes"
    assert "makes about 56,763,192 sizes; at most 1000" in err.value.message


@pytest.mark.parametrize("begin, end, factor", [("8", "1G", 2.0), ("8", "16G", 1.1), ("1", "64K", 1.01),
                                                ("8", "4K", 1.5), ("12", "12K", 32.0)])
def test_the_estimate_is_close_to_the_real_count(begin, end, factor):
    real = len(size_range(begin, end, factor))
    assert real <= MAX_SIZES
    estimate = estimate_size_count(parse_size(begin), parse_size(end), factor)
    assert abs(estimate - real) <= max(2, real // 10)  # the message says "about": within 10%


@pytest.mark.parametrize("text", ["0", "1025T", "99999999999999999999T"])
def test_sizes_beyond_a_pebibyte_or_below_a_byte_are_refused(text):
    with pytest.raises(UsageError) as err:
        parse_size(text, "-e")
    assert err.value.reference == "invalid-size" and f"-e {text} is out of range" in err.value.message
