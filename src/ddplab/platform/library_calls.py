"""The collective library's own calls, as the library engine makes them (collectives.common.LibraryCall): what each
one reads and writes on one rank, in elements, by the count convention the libraries share (NCCL's: all_gather's
count is what each rank sends, reduce_scatter's what each rank receives, send's and recv's one direction, the
others' the whole buffer). A collective names the calls it makes in its own file (collectives/<name>.py); this
table is the library's, and ``check_call`` refuses a call whose buffers would let the library read or write past
them.
"""

from __future__ import annotations

from typing import Callable

from ..collectives.common import LibraryCall

# call -> (count, world size) -> (elements the call reads, elements it writes) on one rank
CALLS: dict[str, Callable[[int, int], tuple[int, int]]] = {
    "all_reduce": lambda count, n: (count, count),
    "all_gather": lambda count, n: (count, count * n),
    "reduce_scatter": lambda count, n: (count * n, count),
    "broadcast": lambda count, n: (count, count),
    "reduce": lambda count, n: (count, count),
    "send": lambda count, n: (count, 0),
    "recv": lambda count, n: (0, count),
}


def check_call(call: LibraryCall, world_size: int) -> None:
    """Refuse a call whose buffers do not hold what the library will read and write."""
    if call.kind not in CALLS:
        raise ValueError(f'unknown library call "{call.kind}"; valid: {", ".join(CALLS)}')
    want_send, want_recv = CALLS[call.kind](call.count, world_size)
    for role, tensor, want in (("send", call.send, want_send), ("recv", call.recv, want_recv)):
        if want == 0:
            continue
        if tensor is None:
            raise ValueError(f"{call.kind}: no {role} buffer")
        if tensor.numel() != want or not tensor.is_contiguous():
            raise ValueError(f"{call.kind}: {role} buffer holds {tensor.numel()} elements "
                             f"({'contiguous' if tensor.is_contiguous() else 'not contiguous'}); the call needs "
                             f"{want} contiguous (count {call.count}, {world_size} ranks)")
    if call.send is not None and call.recv is not None and call.send.dtype != call.recv.dtype:
        raise ValueError(f"{call.kind}: send is {call.send.dtype}, recv is {call.recv.dtype}")
