"""all_reduce: every rank ends with the sum of all ranks' buffers.

S = count * elem bytes; busbw = algbw * 2(n-1)/n (each element needs n-1 additions and n copies spread over n
links; nccl-tests all_reduce.cu). torch's all_reduce works in place only, so there is no out-of-place row.
"""

from .common import Collective, LibraryCall, Prepared, count_wrong, one_buffer, reduce_values


def _prepare(count, n, rank, dtype, device, in_place):
    import torch.distributed as dist

    buf = reduce_values(rank, 0, count, dtype, device)

    def expected():
        return sum(reduce_values(r, 0, count, dtype, device) for r in range(n))

    return Prepared(run=lambda async_op=False: dist.all_reduce(buf, async_op=async_op),
                    fill=lambda: buf.copy_(reduce_values(rank, 0, count, dtype, device)),
                    wrong=lambda: count_wrong(buf, expected()), output=buf,
                    library=(LibraryCall("all_reduce", count, send=buf, recv=buf, op="sum"),))


SPEC = Collective("all_reduce", chunked=False, bus_factor=lambda n: 2 * (n - 1) / n, placements=(True,),
                  prepare=_prepare, buffers=one_buffer, nccl_tests="all_reduce", redop="sum")
