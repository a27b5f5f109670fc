"""send_recv as a ring shift: rank r sends to r+1 and receives from r-1, all at once.

S = count * elem bytes; busbw = algbw (nccl-tests sendrecv.cu). One batch_isend_irecv, so no rank waits on its
neighbour's send before posting its receive. Needs at least 2 ranks.
"""

from .common import Collective, LibraryCall, Prepared, count_wrong, ident_values, two_buffers


def _prepare(count, n, rank, dtype, device, in_place):
    import torch
    import torch.distributed as dist

    send = ident_values(rank, 0, count, dtype, device)
    recv = torch.zeros(count, dtype=dtype, device=device)
    peer_to, peer_from = (rank + 1) % n, (rank - 1) % n

    def run(async_op=False):
        ops = [dist.P2POp(dist.isend, send, peer_to), dist.P2POp(dist.irecv, recv, peer_from)]
        works = dist.batch_isend_irecv(ops)
        if async_op:
            return works
        for work in works:
            work.wait()

    def fill():
        recv.zero_()
        send.copy_(ident_values(rank, 0, count, dtype, device))

    # The library engine posts the same pair as one group (nccl-tests' sendrecv).
    pair = (LibraryCall("send", count, send=send, peer=peer_to), LibraryCall("recv", count, recv=recv, peer=peer_from))
    return Prepared(run=run, fill=fill, wrong=lambda: count_wrong(recv, ident_values(peer_from, 0, count, dtype,
                                                                                      device)), output=recv,
                    library=pair)


SPEC = Collective("send_recv", chunked=False, bus_factor=lambda n: 1.0, placements=(False,), prepare=_prepare,
                  buffers=two_buffers, min_ranks=2, staged_ok=False, nccl_tests="sendrecv")
