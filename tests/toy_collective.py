"""A collective ddplab does not ship, in one file (issue 19): all_reduce with MAX, every rank ending with the
largest value any rank held. tests/integration/test_toy_plugins.py registers it and sweeps it."""

from ddplab.collectives.common import Collective, LibraryCall, Prepared, count_wrong, one_buffer, reduce_values


def _prepare(count, n, rank, dtype, device, in_place):
    import torch
    import torch.distributed as dist

    buf = reduce_values(rank, 0, count, dtype, device)

    def expected():
        return torch.stack([reduce_values(r, 0, count, dtype, device) for r in range(n)]).amax(dim=0)

    return Prepared(run=lambda async_op=False: dist.all_reduce(buf, op=dist.ReduceOp.MAX, async_op=async_op),
                    fill=lambda: buf.copy_(reduce_values(rank, 0, count, dtype, device)),
                    wrong=lambda: count_wrong(buf, expected()), output=buf,
                    library=(LibraryCall("all_reduce", count, send=buf, recv=buf, op="max"),))


SPEC = Collective("toy_max", chunked=False, bus_factor=lambda n: 2 * (n - 1) / n, placements=(True,),
                  prepare=_prepare, buffers=one_buffer, redop="max")
