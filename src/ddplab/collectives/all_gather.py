"""all_gather: every rank ends with all ranks' chunks, in rank order.

S = count * elem bytes of the gathered buffer (each rank sends count/n); busbw = algbw * (n-1)/n (nccl-tests
all_gather.cu). In place, rank r's input is chunk r of the output. gloo gathers into a flat host copy per call.
"""

from .common import GLOO_COPIES_OUTPUT, Buffers, Collective, LibraryCall, Prepared, count_wrong, ident_values


def _prepare(count, n, rank, dtype, device, in_place):
    import torch
    import torch.distributed as dist

    per = count // n
    out = torch.zeros(count, dtype=dtype, device=device)
    inp = out[rank * per:(rank + 1) * per] if in_place else torch.empty(per, dtype=dtype, device=device)

    def fill():
        out.zero_()
        inp.copy_(ident_values(rank, 0, per, dtype, device))

    def expected():
        return torch.cat([ident_values(r, 0, per, dtype, device) for r in range(n)])

    # torch 2.13 renamed all_gather_into_tensor to all_gather_single; same arguments.
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    fill()
    return Prepared(run=lambda async_op=False: gather(out, inp, async_op=async_op), fill=fill,
                    wrong=lambda: count_wrong(out, expected()), output=out,
                    library=(LibraryCall("all_gather", per, send=inp, recv=out),))


def _buffers(count, n, in_place):
    return Buffers(send=count // n, recv=count, aliased=in_place)


SPEC = Collective("all_gather", chunked=True, bus_factor=lambda n: (n - 1) / n, placements=(False, True),
                  prepare=_prepare, buffers=_buffers, nccl_tests="all_gather", gloo_copies=GLOO_COPIES_OUTPUT)
