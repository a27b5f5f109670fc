"""all_to_all: rank r sends its chunk j to rank j and receives every rank's chunk r.

S = count * elem bytes of one rank's buffer (n chunks of count/n); busbw = algbw * (n-1)/n (nccl-tests
alltoall.cu). Out of place only (torch's all_to_all_single).
"""

from .common import Collective, LibraryCall, Prepared, count_wrong, ident_values, two_buffers


def _prepare(count, n, rank, dtype, device, in_place):
    import torch
    import torch.distributed as dist

    per = count // n
    inp = torch.empty(count, dtype=dtype, device=device)
    out = torch.zeros(count, dtype=dtype, device=device)

    def fill():
        out.zero_()
        inp.copy_(torch.cat([ident_values(rank, j, per, dtype, device) for j in range(n)]))

    def expected():
        return torch.cat([ident_values(j, rank, per, dtype, device) for j in range(n)])

    # The library engine sends chunk j to rank j and receives rank j's chunk, every pair in one group, as
    # nccl-tests' alltoall does.
    exchange = tuple(call for j in range(n) for call in (
        LibraryCall("send", per, send=inp[j * per:(j + 1) * per], peer=j),
        LibraryCall("recv", per, recv=out[j * per:(j + 1) * per], peer=j)))
    fill()
    return Prepared(run=lambda async_op=False: dist.all_to_all_single(out, inp, async_op=async_op), fill=fill,
                    wrong=lambda: count_wrong(out, expected()), output=out, library=exchange)


SPEC = Collective("all_to_all", chunked=True, bus_factor=lambda n: (n - 1) / n, placements=(False,),
                  prepare=_prepare, buffers=two_buffers, nccl_tests="alltoall")
