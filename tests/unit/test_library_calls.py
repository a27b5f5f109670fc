"""Every collective has a library call, on the torch engine's own buffers, moving nccl-tests' bytes."""

import pytest

from ddplab import collectives
from ddplab.collectives.common import torch_dtype
from ddplab.platform.library_calls import check_call

SIZE = 96 * 4  # bytes: a multiple of 2, 3 and 4 ranks' chunks


def _cases():
    for name in collectives.COLLECTIVES:
        spec = collectives.get(name)
        for n in (2, 3, 4):
            for in_place in spec.placements:
                yield pytest.param(name, n, in_place, id=f"{name}-n{n}-{'in' if in_place else 'out'}")


def _prepared(name, n, in_place, rank=1, dtype="float"):
    import torch

    spec = collectives.get(name)
    elem = torch.tensor([], dtype=torch_dtype(dtype)).element_size()
    count = spec.count_for(SIZE, n, elem)
    return spec.prepare(count, n, rank, torch_dtype(dtype), torch.device("cpu"), in_place), count * elem, elem


def _shares_memory(a, b) -> bool:
    a0, b0 = a.data_ptr(), b.data_ptr()
    return a0 < b0 + b.numel() * b.element_size() and b0 < a0 + a.numel() * a.element_size()


# nccl-tests' size S (the row's size_bytes) from the library calls alone, per collective
# (nccl-tests src/*.cu; docs/metrics.md): what one rank's call moves, by the library's count convention.
def _library_size_bytes(name, calls, n, elem):
    if name in ("all_reduce", "broadcast", "reduce"):
        return calls[0].count * elem
    if name in ("all_gather", "reduce_scatter"):
        return calls[0].count * n * elem
    return sum(c.count for c in calls if c.kind == "send") * elem  # all_to_all, send_recv


def test_every_collective_has_a_library_call():
    for name in collectives.COLLECTIVES:
        spec = collectives.get(name)
        for in_place in spec.placements:
            prepared, _, _ = _prepared(name, 2, in_place)
            assert prepared.library, f"{name} in_place={in_place} has no library call"


@pytest.mark.parametrize("name,n,in_place", list(_cases()))
def test_library_calls_fit_the_torch_buffers_and_move_the_same_bytes(name, n, in_place):
    prepared, size_bytes, elem = _prepared(name, n, in_place)
    for call in prepared.library:
        check_call(call, n)  # counts fit the buffers the torch engine prepared
    assert _library_size_bytes(name, prepared.library, n, elem) == size_bytes
    writes = [c.recv for c in prepared.library if c.recv is not None]
    assert all(_shares_memory(w, prepared.output) for w in writes), "a library call writes outside the checked output"
    assert sum(w.numel() for w in writes) == prepared.output.numel(), "the library leaves part of the output unwritten"


@pytest.mark.parametrize("name,in_place", [("all_gather", True), ("reduce_scatter", True)])
def test_in_place_calls_use_the_rank_chunk_of_one_buffer(name, in_place):
    prepared, _, elem = _prepared(name, 4, in_place, rank=2)
    call = prepared.library[0]
    whole, chunk = (call.recv, call.send) if name == "all_gather" else (call.send, call.recv)
    assert chunk.data_ptr() == whole.data_ptr() + 2 * call.count * elem  # the library's in-place layout


def test_send_recv_pairs_with_the_ring_neighbours_and_all_to_all_with_every_rank():
    ring, _, _ = _prepared("send_recv", 4, False, rank=1)
    assert [(c.kind, c.peer) for c in ring.library] == [("send", 2), ("recv", 0)]
    a2a, _, _ = _prepared("all_to_all", 3, False, rank=1)
    assert sorted((c.kind, c.peer) for c in a2a.library) == [("recv", 0), ("recv", 1), ("recv", 2),
                                                              ("send", 0), ("send", 1), ("send", 2)]


def test_rooted_and_reducing_calls_say_so():
    calls = {name: _prepared(name, 2, True)[0].library[0] for name in ("all_reduce", "broadcast", "reduce")}
    assert (calls["broadcast"].root, calls["reduce"].root) == (0, 0)
    assert (calls["all_reduce"].op, calls["reduce"].op, calls["broadcast"].op) == ("sum", "sum", None)
    assert _prepared("reduce_scatter", 2, False)[0].library[0].op == "sum"
