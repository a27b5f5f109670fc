"""broadcast from rank 0: every rank ends with rank 0's buffer.

S = count * elem bytes; busbw = algbw * 1 (the root's link carries everything; nccl-tests broadcast.cu). torch
broadcasts in place only.
"""

from .common import Collective, LibraryCall, Prepared, count_wrong, ident_values, one_buffer

ROOT = 0


def _prepare(count, n, rank, dtype, device, in_place):
    import torch
    import torch.distributed as dist

    buf = torch.empty(count, dtype=dtype, device=device)

    def fill():
        buf.copy_(ident_values(ROOT, 0, count, dtype, device)) if rank == ROOT else buf.zero_()

    fill()
    return Prepared(run=lambda async_op=False: dist.broadcast(buf, ROOT, async_op=async_op), fill=fill,
                    wrong=lambda: count_wrong(buf, ident_values(ROOT, 0, count, dtype, device)), output=buf,
                    library=(LibraryCall("broadcast", count, send=buf, recv=buf, root=ROOT),))


SPEC = Collective("broadcast", chunked=False, bus_factor=lambda n: 1.0, placements=(True,), prepare=_prepare,
                  buffers=one_buffer, nccl_tests="broadcast", root=ROOT)
