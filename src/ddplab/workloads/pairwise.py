"""Machine pairs: every pair of machines once, one rank on each (its machine's lowest), all_reduce at each
size, the pairs of one round at the same time (workloads/machines.py runs them, cluster/topology.py plans
the rounds). The ranks gather every pair's rows, so every machine's report has all of them."""

from __future__ import annotations

from ..records.pairwise import PairwiseRankResult
from .machines import pair_rounds


def run(ctx) -> PairwiseRankResult:
    job = pair_rounds(ctx, ctx.settings)
    tested = [job.groups[r.group].label for r in job.results if r.rank == ctx.rank]
    return PairwiseRankResult(pairs=tested, machines=job)
