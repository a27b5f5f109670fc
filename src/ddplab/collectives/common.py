"""What every collective shares: sizes, bus factors, and exactly-checkable data.

Sizes follow nccl-tests: ``size`` is the largest buffer in bytes, ``count = size / elem`` elements (for the
chunked collectives the whole gathered/scattered buffer, rounded down to a multiple of n), algbw = count*elem / t,
busbw = algbw times the collective's bus factor; GB = 1e9 bytes.

Check data are small integers, so that every reduction is exact in every dtype ddplab offers (bfloat16 holds
integers up to 256 exactly): reducing collectives use values 0..4, data-moving ones 0..60 that identify rank and
chunk. They are computed in place on one index tensor, so making them costs one index beside the result. Each
collective also says which buffers one call is given (``Buffers``), what memory planning counts.
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
class LibraryCall:
    """One call the library engine makes straight into the collective library, on the very buffers the torch
    engine prepared, so both engines move the same bytes and one check serves. ``kind`` names the library's own
    call and ``count`` is what the library is told, by its convention (platform/library_calls.py). Several calls
    of one collective go out as one group."""

    kind: str
    count: int
    send: object = None  # the tensor the call reads; None for recv
    recv: object = None  # the tensor the call writes; None for send
    root: int | None = None  # broadcast, reduce
    peer: int | None = None  # send, recv
    op: str | None = None  # reductions: "sum"


@dataclass(frozen=True)
class Buffers:
    """The tensors one call of a collective is given on one rank, in elements."""

    send: int
    recv: int
    aliased: bool  # send is recv, or a view into it (in place): one allocation
    one_tensor: bool = False  # the call takes a single tensor (all_reduce, broadcast, reduce)

    @property
    def allocated(self) -> int:
        """Elements the rank allocates for the call."""
        return self.recv if self.aliased else self.send + self.recv

    @property
    def passed(self) -> tuple[int, ...]:
        """Elements of each tensor the call is handed (a backend that stages copies each one)."""
        return (self.recv,) if self.one_tensor else (self.send, self.recv)

    @property
    def largest(self) -> int:
        return max(self.send, self.recv)


# What gloo itself copies for one call, beside the buffers it is given (memory_plan.gloo_copies counts it).
GLOO_COPIES_INPUT = "input"  # a clone of the whole input, kept until the call is waited for
GLOO_COPIES_OUTPUT = "output"  # a flat host copy of the output, one per call it runs


def one_buffer(count: int, n: int, in_place: bool) -> Buffers:
    """all_reduce, broadcast, reduce: one buffer, sent from and received into."""
    return Buffers(count, count, aliased=True, one_tensor=True)


def two_buffers(count: int, n: int, in_place: bool) -> Buffers:
    """all_to_all, send_recv: a send buffer and a receive buffer of the same size."""
    return Buffers(count, count, aliased=False)


@dataclass(frozen=True)
class Prepared:
    """Buffers for one (size, placement) on one rank."""

    run: Callable[..., object]  # issue the collective once; run(async_op=True) returns its work handle(s)
    fill: Callable[[], None]  # write this rank's check data into the inputs
    wrong: Callable[[], int]  # elements that differ from the expected output on this rank
    output: object = None  # the tensor the check reads (tests corrupt it to prove the check bites)
    library: tuple[LibraryCall, ...] = ()  # the same collective as direct library calls (one group)


@dataclass(frozen=True)
class Collective:
    """Every fact about one collective: how nccl-tests names and sizes it, its bus factor, what torch offers, how
    to fill, run and check it exactly, the library calls it makes and what one call is given."""

    name: str
    chunked: bool  # size is the whole buffer, each rank owns size/n (all_gather, reduce_scatter, all_to_all)
    bus_factor: Callable[[int], float]
    placements: tuple[bool, ...]  # in_place values torch.distributed offers for it
    prepare: Callable[..., Prepared]  # (count, n, rank, dtype, device, in_place) -> Prepared
    buffers: Callable[[int, int, bool], Buffers]  # (count, n, in_place) -> what one call is given
    min_ranks: int = 1
    # gloo stages device tensors through host memory for collectives only; for point-to-point it hands the device
    # address to its socket ("writev: Bad address"). Such an op is skipped there, with the reason.
    staged_ok: bool = True
    nccl_tests: str | None = None  # the nccl-tests binary's stem (<stem>_perf); None: nccl-tests has none
    redop: str = "none"  # the reduction, as nccl-tests' redop column prints it
    root: int = -1  # the root rank, as nccl-tests' root column prints it (-1: none)
    gloo_copies: str = "none"  # what gloo copies itself for one call (GLOO_COPIES_*; memory_plan.gloo_copies)

    def count_for(self, size_bytes: int, n: int, elem_bytes: int) -> int:
        count = size_bytes // elem_bytes
        return (count // n) * n if self.chunked else count

    def algbw_gbps(self, count: int, elem_bytes: int, time_us: float) -> float:
        return count * elem_bytes / 1e9 / (time_us * 1e-6) if time_us > 0 else 0.0

    def busbw_gbps(self, algbw: float, n: int) -> float | None:
        return algbw * self.bus_factor(n) if n > 1 else None  # meaningless at world size 1


# int32 counts to 2**31 - 1; the offsets added below stay far under this margin.
INT32_INDEX_LIMIT = 2**31 - 2**20


def index_bytes(numel: int) -> int:
    """Bytes per element of the index the check data are computed on."""
    return 4 if numel < INT32_INDEX_LIMIT else 8


def _index(numel: int, device):
    import torch

    return torch.arange(numel, dtype=torch.int32 if index_bytes(numel) == 4 else torch.int64, device=device)


def reduce_values(rank: int, chunk: int, numel: int, dtype, device):
    """Values 0..4 whose sums over up to 64 ranks stay exact in bfloat16: (rank % 3) + (k + chunk) % 3."""
    k = _index(numel, device)
    return k.add_(chunk).remainder_(3).add_(rank % 3).to(dtype)


def ident_values(rank: int, chunk: int, numel: int, dtype, device):
    """Values 0..60 that differ between ranks and chunks, to catch misrouted data: (7 rank + 3 chunk + k) % 61."""
    k = _index(numel, device)
    return k.add_(rank * 7 + chunk * 3).remainder_(61).to(dtype)


def count_wrong(actual, expected) -> int:
    return int((actual != expected).sum())
