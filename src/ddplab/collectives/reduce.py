"""reduce to rank 0: rank 0 ends with the sum of all ranks' buffers.

S = count * elem bytes; busbw = algbw * 1 (the root's link is the bottleneck; nccl-tests reduce.cu). torch reduces
in place only; only the root's result is checked.
"""

from .common import Collective, LibraryCall, Prepared, count_wrong, one_buffer, reduce_values

ROOT = 0


def _prepare(count, n, rank, dtype, device, in_place):
    import torch.distributed as dist

    buf = reduce_values(rank, 0, count, dtype, device)

    def wrong():
        if rank != ROOT:
            return 0
        return count_wrong(buf, sum(reduce_values(r, 0, count, dtype, device) for r in range(n)))

    return Prepared(run=lambda async_op=False: dist.reduce(buf, ROOT, async_op=async_op),
                    fill=lambda: buf.copy_(reduce_values(rank, 0, count, dtype, device)), wrong=wrong, output=buf,
                    library=(LibraryCall("reduce", count, send=buf, recv=buf, root=ROOT, op="sum"),))


SPEC = Collective("reduce", chunked=False, bus_factor=lambda n: 1.0, placements=(True,), prepare=_prepare,
                  buffers=one_buffer, nccl_tests="reduce", redop="sum", root=ROOT)
