"""nccl-tests size arguments, and reading nccl-tests output (the real H200 fixture)."""

from pathlib import Path

import pytest

from ddplab.measurements import nccl_tests
from ddplab.reading.comparison import line_up
from ddplab.errors import UsageError
from ddplab.records.compare import TimedRow
from ddplab.basics.sizes import parse_size, size_range

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures/all_reduce_perf_2xH200_nccl2.28.9.txt"


def test_sizes_use_powers_of_1024_like_nccl_tests():
    assert parse_size("8") == 8
    assert parse_size("64K") == 65536
    assert parse_size("1G") == 1 << 30
    assert size_range("8", "64", 2) == [8, 16, 32, 64]


@pytest.mark.parametrize("args, reference", [
    (("4X", "1M", 2), "invalid-size"),
    (("1G", "1M", 2), "invalid-size-range"),
    (("8", "1M", 1.0), "invalid-step-factor"),
    (("-5", "1M", 2), "invalid-size"),
])
def test_bad_sizes_are_usage_errors(args, reference):
    with pytest.raises(UsageError) as err:
        size_range(*args)
    assert err.value.reference == reference
    assert err.value.exit_code == 2


@pytest.fixture()
def fixture_text():
    return FIXTURE.read_text()


def test_importer_reads_the_real_fixture(fixture_text):
    table = nccl_tests.parse(fixture_text)
    assert table.world_size == 2 and table.avg_busbw_gbps == pytest.approx(103.707)
    assert len(table.rows) == 32  # 16 sizes x (out-of-place, in-place)
    assert {r.op for r in table.rows} == {"all_reduce"}
    row = next(r for r in table.rows if r.size_bytes == 268435456 and not r.in_place)
    assert (row.time_us, row.algbw_gbps, row.busbw_gbps, row.num_wrong) == (890.31, 301.51, 301.51, 0)
    last = table.rows[-1]
    assert last.size_bytes == 4294967296 and last.in_place and last.time_us == 12477.1


def test_importer_survives_interleaved_info_lines_and_missing_columns(fixture_text):
    lines = fixture_text.splitlines()
    noisy = []
    for i, line in enumerate(lines):
        noisy.append(line)
        if i % 3 == 0:
            noisy.append(f"vm:2112:2130 [1] NCCL INFO Channel {i:02d}/0 : 0[0] -> 1[1] via P2P/CUMEM/read")
            noisy.append("vm:2112:2112 [0] MCCL INFO comm 0x55d0 rank 0 nRanks 2 - Init COMPLETE")
    table = nccl_tests.parse("\n".join(noisy))
    assert len(table.rows) == 32
    # An older table without the redop and root columns, with N/A in-place cells:
    old = ("#  Collective test starting: all_gather_perf\n"
           "        1024           128     float    10.50    0.10    0.05       0      N/A     N/A     N/A     N/A\n")
    rows = nccl_tests.parse(old).rows
    assert len(rows) == 1 and rows[0].op == "all_gather" and rows[0].time_us == 10.5 and not rows[0].in_place


def test_compare_flags_slower_rows_beyond_tolerance():
    old = [TimedRow("all_reduce", 1024, True, 10.0, 1.0)]
    same = line_up(old, old, 0.05, 0)
    assert not same[0].regression and same[0].time_change == 0
    slower = [TimedRow("all_reduce", 1024, True, 11.0, 1.0)]
    assert line_up(old, slower, 0.05, 0)[0].regression
    assert not line_up(old, slower, 0.05, 4096)[0].regression  # below --min-size: reported, not judged
