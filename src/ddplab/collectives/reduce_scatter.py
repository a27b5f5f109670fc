"""reduce_scatter: rank r ends with the sum over ranks of everyone's chunk r.

S = count * elem bytes of the input buffer (each rank receives count/n); busbw = algbw * (n-1)/n (nccl-tests
reduce_scatter.cu). In place, rank r's output is chunk r of its input buffer. gloo all-reduces a clone of the whole
input and keeps it until the call is waited for (memory_plan.gloo_copies).
"""

from .common import GLOO_COPIES_INPUT, Buffers, Collective, LibraryCall, Prepared, count_wrong, reduce_values


def _prepare(count, n, rank, dtype, device, in_place):
    import torch
    import torch.distributed as dist

    per = count // n
    inp = torch.empty(count, dtype=dtype, device=device)
    out = inp[rank * per:(rank + 1) * per] if in_place else torch.empty(per, dtype=dtype, device=device)

    def fill():
        inp.copy_(torch.cat([reduce_values(rank, j, per, dtype, device) for j in range(n)]))

    def expected():
        return sum(reduce_values(r, rank, per, dtype, device) for r in range(n))

    # torch 2.13 renamed reduce_scatter_tensor to reduce_scatter_single; same arguments.
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    fill()
    return Prepared(run=lambda async_op=False: scatter(out, inp, async_op=async_op), fill=fill,
                    wrong=lambda: count_wrong(out, expected()), output=out,
                    library=(LibraryCall("reduce_scatter", per, send=inp, recv=out, op="sum"),))


def _buffers(count, n, in_place):
    return Buffers(send=count, recv=count // n, aliased=in_place)


SPEC = Collective("reduce_scatter", chunked=True, bus_factor=lambda n: (n - 1) / n, placements=(False, True),
                  prepare=_prepare, buffers=_buffers, nccl_tests="reduce_scatter", redop="sum",
                  gloo_copies=GLOO_COPIES_INPUT)
