"""A library binding for CPU tests: the adapter interface of platform/library_binding.py over gloo.

Selected with ``DDPLAB_LIBRARY_BINDING=tests.library_fake:GlooBinding`` (every rank inherits it;
the repository root must be importable). Each call does what the library's call of that kind
does, on the tensors the call names and nothing else, so a wrong entry in a collective's call
table (buffer, count, peer, root) shows up as wrong elements in the torch engine's own check.
"""

from __future__ import annotations

import os
from typing import Callable, Sequence


class GlooBinding:
    name = "gloo-fake"

    def __init__(self):
        self.unique_ids: list[bytes] = []  # what each open() was given, for the tests to compare
        self.issued: dict[str, int] = {}  # calls issued per kind: proof that the library engine made them

    def versions(self) -> dict[str, str | None]:
        return {"binding": "test", "library": "gloo", "library_path": None}

    def new_unique_id(self) -> bytes:
        return os.urandom(128)  # the size of an NCCL unique id

    def open(self, world_size: int, rank: int, unique_id: bytes, device_index: int | None):
        import torch.distributed as dist

        assert (dist.get_world_size(), dist.get_rank()) == (world_size, rank), "fake spans the world group only"
        self.unique_ids.append(unique_id)
        return dist.new_group(backend="gloo")  # a communicator of its own, as the library's would be

    def close(self, comm) -> None:
        import torch.distributed as dist

        dist.destroy_process_group(comm)

    def new_stream(self, device_index):
        return None  # gloo calls return when done

    def synchronize(self, stream) -> None:
        pass

    def follow_framework(self, stream, device_index) -> None:
        pass

    def new_event(self, stream):
        return None  # the host has no device events: the engines report no device time, as torch's on the host

    def bind(self, calls: Sequence, comm, stream) -> Callable[[], None]:
        if all(c.kind in ("send", "recv") for c in calls):
            return self._counted("group", lambda: _exchange(calls, comm))
        if len(calls) != 1:
            raise ValueError(f"the fake groups only send/recv, got {[c.kind for c in calls]}")
        call = calls[0]
        return self._counted(call.kind, lambda: _COLLECTIVES[call.kind](call, comm))

    def _counted(self, kind: str, issue: Callable[[], None]) -> Callable[[], None]:
        def counted() -> None:
            self.issued[kind] = self.issued.get(kind, 0) + 1
            issue()
        return counted


def _all_reduce(call, group):
    import torch.distributed as dist

    if call.send.data_ptr() != call.recv.data_ptr():
        call.recv.copy_(call.send)
    dist.all_reduce(call.recv, group=group)


def _all_gather(call, group):
    import torch.distributed as dist

    n = dist.get_world_size(group)
    dist.all_gather(list(call.recv.split(call.count)), call.send.clone(), group=group)  # send may lie in recv
    assert call.recv.numel() == call.count * n


def _reduce_scatter(call, group):
    import torch.distributed as dist

    rank = dist.get_rank(group)
    summed = call.send.clone()
    dist.all_reduce(summed, group=group)
    call.recv.copy_(summed[rank * call.count:(rank + 1) * call.count])


def _broadcast(call, group):
    import torch.distributed as dist

    if dist.get_rank(group) == call.root and call.send.data_ptr() != call.recv.data_ptr():
        call.recv.copy_(call.send)
    dist.broadcast(call.recv, call.root, group=group)


def _reduce(call, group):
    import torch.distributed as dist

    summed = call.send.clone()
    dist.reduce(summed, call.root, group=group)
    if dist.get_rank(group) == call.root:
        call.recv.copy_(summed)


_COLLECTIVES = {"all_reduce": _all_reduce, "all_gather": _all_gather, "reduce_scatter": _reduce_scatter,
                "broadcast": _broadcast, "reduce": _reduce}


def _exchange(calls, group):
    """A group of sends and receives: to self is a copy (as in the library), the rest one batch."""
    import torch.distributed as dist

    rank = dist.get_rank(group)
    to_self = [c for c in calls if c.kind == "send" and c.peer == rank]
    from_self = [c for c in calls if c.kind == "recv" and c.peer == rank]
    assert len(to_self) == len(from_self), "a send to self needs its receive"
    for send, recv in zip(to_self, from_self):
        recv.recv.copy_(send.send)
    ops = [dist.P2POp(dist.isend, c.send, c.peer, group=group) if c.kind == "send"
           else dist.P2POp(dist.irecv, c.recv, c.peer, group=group)
           for c in calls if c.peer != rank]
    if ops:
        for work in dist.batch_isend_irecv(ops):
            work.wait()
