"""Byte counts and bus factors against nccl-tests' definitions; the check catches bad data."""

import pytest

from ddplab import collectives
from ddplab.errors import UsageError

# nccl-tests src/*.cu: busbw = algbw * factor (docs/metrics.md), at n = 8.
NCCL_TESTS_FACTOR_N8 = {
    "all_reduce": 2 * 7 / 8, "all_gather": 7 / 8, "reduce_scatter": 7 / 8, "all_to_all": 7 / 8,
    "broadcast": 1.0, "reduce": 1.0, "send_recv": 1.0,
}


def test_every_registered_collective_has_a_factor_row():
    assert set(collectives.COLLECTIVES) == set(NCCL_TESTS_FACTOR_N8)


@pytest.mark.parametrize("name", list(NCCL_TESTS_FACTOR_N8))
def test_bus_factor_matches_nccl_tests(name):
    spec = collectives.get(name)
    assert spec.bus_factor(8) == pytest.approx(NCCL_TESTS_FACTOR_N8[name])
    assert spec.busbw_gbps(10.0, 1) is None  # busbw is not defined for one rank


def test_algbw_uses_gb_1e9_and_the_whole_buffer():
    spec = collectives.get("all_reduce")
    # nccl-tests fixture row: 268435456 B in 890.31 us -> 301.51 GB/s algbw = busbw at n=2
    algbw = spec.algbw_gbps(268435456 // 4, 4, 890.31)
    assert algbw == pytest.approx(301.51, abs=0.01)
    assert spec.busbw_gbps(algbw, 2) == pytest.approx(301.51, abs=0.01)


def test_chunked_collectives_round_count_to_ranks():
    ag = collectives.get("all_gather")
    assert ag.count_for(1000, 3, 4) == 249  # 250 elements -> 83 per rank -> 249
    assert collectives.get("all_reduce").count_for(1000, 3, 4) == 250


def test_parse_ops_accepts_all_and_kebab_case_and_rejects_typos():
    assert collectives.parse_ops("all") == list(collectives.COLLECTIVES)
    assert collectives.parse_ops("all-reduce,send_recv") == ["all_reduce", "send_recv"]
    with pytest.raises(UsageError) as err:
        collectives.parse_ops("all_reduce,allgather")
    assert '"allgather"' in err.value.message and "all_gather" in err.value.message


@pytest.fixture()
def one_rank_group(tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("name", ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all"])
@pytest.mark.parametrize("dtype", ["float", "bfloat16", "int32"])
def test_check_passes_on_correct_data_and_counts_corruption(one_rank_group, name, dtype):
    import torch

    from ddplab.collectives.common import torch_dtype

    spec = collectives.get(name)
    for in_place in spec.placements:
        prepared = spec.prepare(64, 1, 0, torch_dtype(dtype), torch.device("cpu"), in_place)
        prepared.fill()
        prepared.run()
        assert prepared.wrong() == 0
        prepared.fill()
        prepared.run()
        prepared.output.view(-1)[0] += 1  # one wrong element
        assert prepared.wrong() == 1, f"{name} in_place={in_place}: corruption not detected"
