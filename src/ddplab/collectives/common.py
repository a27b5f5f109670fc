"""What every collective shares: sizes, bus factors, and exactly-checkable data.

Sizes follow nccl-tests: ``size`` is the largest buffer in bytes. For all_reduce,
broadcast, reduce and send_recv each rank holds ``count = size / elem`` elements and
algbw = count*elem / t. For all_gather, reduce_scatter and all_to_all the size is the
whole gathered/scattered buffer: each rank contributes ``count / n`` elements,
count is rounded down to a multiple of n, and algbw = count*elem / t. busbw = algbw
times the collective's bus factor; GB = 1e9 bytes.

Check data are small integers, so that every reduction is exact in every dtype ddplab
offers (bfloat16 holds integers up to 256 exactly): reducing collectives use values
0..4 (sums stay <= 4n), data-moving ones use values 0..60 that identify rank and chunk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

DTYPES = ("float", "double", "half", "bfloat16", "int32")


def torch_dtype(name: str):
    import torch

    return {"float": torch.float32, "double": torch.float64, "half": torch.float16,
            "bfloat16": torch.bfloat16, "int32": torch.int32}[name]


@dataclass(frozen=True)
class Prepared:
    """Buffers for one (size, placement) on one rank."""

    run: Callable[..., object]  # issue the collective once; run(async_op=True) returns its work handle(s)
    fill: Callable[[], None]  # write this rank's check data into the inputs
    wrong: Callable[[], int]  # elements that differ from the expected output on this rank
    output: object = None  # the tensor the check reads (tests corrupt it to prove the check bites)


@dataclass(frozen=True)
class Collective:
    name: str
    chunked: bool  # size is the whole buffer, each rank owns size/n (all_gather, reduce_scatter, all_to_all)
    bus_factor: Callable[[int], float]
    placements: tuple[bool, ...]  # in_place values torch.distributed offers for it
    prepare: Callable[..., Prepared]  # (count, n, rank, dtype, device, in_place) -> Prepared
    min_ranks: int = 1

    def count_for(self, size_bytes: int, n: int, elem_bytes: int) -> int:
        count = size_bytes // elem_bytes
        return (count // n) * n if self.chunked else count

    def algbw_gbps(self, count: int, elem_bytes: int, time_us: float) -> float:
        return count * elem_bytes / 1e9 / (time_us * 1e-6) if time_us > 0 else 0.0

    def busbw_gbps(self, algbw: float, n: int) -> float | None:
        return algbw * self.bus_factor(n) if n > 1 else None  # meaningless at world size 1


def reduce_values(rank: int, chunk: int, numel: int, dtype, device):
    """Values 0..4 whose sums over up to 64 ranks stay exact in bfloat16."""
    import torch

    k = torch.arange(numel, device=device)
    return ((rank % 3) + (k + chunk) % 3).to(dtype)


def ident_values(rank: int, chunk: int, numel: int, dtype, device):
    """Values 0..60 that differ between ranks and chunks, to catch misrouted data."""
    import torch

    k = torch.arange(numel, device=device)
    return ((rank * 7 + chunk * 3 + k) % 61).to(dtype)


def count_wrong(actual, expected) -> int:
    return int((actual != expected).sum())
