"""The library engine's adapter for nccl4py, NVIDIA's Python binding of NCCL (the vendor table's ``BindingSpec``
names it): everything specific to that binding, behind the interface library_binding.BindingAdapter declares.
"""

from __future__ import annotations

import importlib
import os
from functools import partial
from typing import Callable, Sequence

from ..collectives.common import LibraryCall
from .collective_lib import decode_version


class Nccl4pyAdapter:
    """Everything nccl4py-specific (written against 0.6.0; its API changed between 0.3 and 0.6).

    Its bindings layer, not its ``Communicator`` class: the bindings take raw pointers and release the GIL around
    each NCCL call, while ``Communicator`` resolves buffer specs on every call (docs/background.md §5).

    Which libnccl: nccl4py looks each symbol up in the global scope first, else asks cuda-pathfinder, which returns
    a libnccl already loaded; so with torch imported first its calls reach the copy torch loaded. ``versions()``
    reports the path, and ``LibraryBinding.available()`` compares it with the copy torch's calls bind to.
    """

    name = "nccl4py"

    def __init__(self, bindings, import_module: Callable = importlib.import_module):
        import torch

        core = import_module("nccl.core")  # public enums and the unique id; needs cuda-core
        self._nccl = bindings
        self._core = core
        self._torch = torch
        # torch.float32 -> NcclDataType.FLOAT32, and so on: the same names on both sides
        self._dtypes = {getattr(torch, name): int(getattr(core.NcclDataType, name.upper())) for name in
                        ("float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8")}
        self._ops = {"sum": int(core.NcclRedOp.SUM)}

    def versions(self) -> dict[str, str | None]:
        from importlib.metadata import PackageNotFoundError, version

        try:
            binding = version("nccl4py")
        except PackageNotFoundError:
            binding = None
        path = self._nccl.get_library_path()
        return {"binding": binding, "library": decode_version(int(self._nccl.get_version())),
                "library_path": os.fsdecode(path) if path else None}

    def new_unique_id(self) -> bytes:
        return bytes(self._core.get_unique_id())

    def open(self, world_size: int, rank: int, unique_id: bytes, device_index: int | None):
        self._torch.cuda.set_device(device_index)  # NCCL binds the communicator to the current device
        return self._nccl.comm_init_rank_scalable(world_size, rank, 1, bytearray(unique_id), 0)

    def close(self, comm) -> None:
        self._nccl.comm_finalize(comm)
        self._nccl.comm_destroy(comm)

    def new_stream(self, device_index: int | None):
        return self._torch.cuda.Stream(device=device_index)

    def synchronize(self, stream) -> None:
        stream.synchronize()

    def new_event(self, stream) -> _StreamEvent:
        return _StreamEvent(self._torch.cuda.Event(enable_timing=True), stream)

    def follow_framework(self, stream, device_index: int | None) -> None:
        stream.wait_stream(self._torch.cuda.current_stream(device_index))

    def bind(self, calls: Sequence[LibraryCall], comm, stream) -> Callable[[], None]:
        handle = stream.cuda_stream
        bound = [self._bind_one(call, comm, handle) for call in calls]
        if len(bound) == 1:
            return bound[0]
        start, end = self._nccl.group_start, self._nccl.group_end

        def grouped() -> None:
            start()
            try:
                for issue in bound:
                    issue()
            finally:
                end()

        return grouped

    def _bind_one(self, call: LibraryCall, comm, stream: int) -> Callable[[], None]:
        nccl = self._nccl
        tensor = call.send if call.send is not None else call.recv
        if tensor.dtype not in self._dtypes:
            raise ValueError(f"{self.name} has no data type for {tensor.dtype}; "
                             f"supported: {', '.join(str(d) for d in self._dtypes)}")
        dtype = self._dtypes[tensor.dtype]
        send = call.send.data_ptr() if call.send is not None else 0
        recv = call.recv.data_ptr() if call.recv is not None else 0
        op, count = self._ops.get(call.op or "sum"), call.count
        # Every bindings call ends with (comm, stream); partial() resolves all arguments now, so a call costs the
        # binding's own call and nothing more.
        head = {
            "all_reduce": (nccl.all_reduce, send, recv, count, dtype, op),
            "all_gather": (nccl.all_gather, send, recv, count, dtype),
            "reduce_scatter": (nccl.reduce_scatter, send, recv, count, dtype, op),
            "broadcast": (nccl.broadcast, send, recv, count, dtype, call.root),
            "reduce": (nccl.reduce, send, recv, count, dtype, op, call.root),
            "send": (nccl.send, send, count, dtype, call.peer),
            "recv": (nccl.recv, recv, count, dtype, call.peer),
        }[call.kind]
        return partial(*head, comm, stream)


class _StreamEvent:
    """A device event that records on one stream (the communicator's), as the timing helpers use events."""

    def __init__(self, event, stream):
        self.event, self.stream = event, stream

    def record(self) -> None:
        self.event.record(self.stream)

    def elapsed_time(self, end: _StreamEvent) -> float:
        return self.event.elapsed_time(end.event)
