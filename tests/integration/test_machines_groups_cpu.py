"""The ranks that wait while a group of ranks measures (workloads/machines.py) outlast the process-group
timeout: a batch over a slow network may take longer than it, and the waiting ranks must not give up."""

from types import SimpleNamespace

import pytest

from ddplab.platform.runtime import DeviceRuntime
from ddplab.records.machines import PAIR, Group
from ddplab.workloads import machines


def _wait_longer_than_the_timeout(rank: int, store: str, out) -> None:
    """One rank of a two-rank job whose process-group timeout is 1 s: rank 0 measures for 3 s alone."""
    import time
    from datetime import timedelta

    import torch.distributed as dist

    # Both ranks meet first on a store with a long timeout: gloo's init waits for its peer within the group's
    # timeout, and two ranks importing torch on a loaded machine arrive more than 1 s apart.
    meeting = dist.FileStore(store, 2)
    meeting.add("arrived", 1)
    while meeting.add("arrived", 0) < 2:
        time.sleep(0.01)
    dist.init_process_group("gloo", store=meeting, rank=rank, world_size=2, timeout=timedelta(seconds=1))
    ctx = SimpleNamespace(rank=rank, local_rank=0, world_size=2, device="cpu", runtime=DeviceRuntime("cpu", 0),
                          status=None)
    try:
        job = machines.run_in_groups(ctx, [], [[Group(PAIR, ["a", "b"], [0])]],
                                     lambda handle, group: time.sleep(3) or "measured")
        out.put((rank, [r.result for r in job.results]))
    except Exception as exc:  # the old barrier: rank 1 gave up after the 1 s timeout
        out.put((rank, f"{type(exc).__name__}"))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_the_ranks_that_wait_outlast_the_process_group_timeout(tmp_path):
    import multiprocessing

    spawn = multiprocessing.get_context("spawn")
    out = spawn.Queue()
    ranks = [spawn.Process(target=_wait_longer_than_the_timeout, args=(r, str(tmp_path / "store"), out))
             for r in (0, 1)]
    for p in ranks:
        p.start()
    try:
        results = dict(out.get(timeout=60) for _ in ranks)
    finally:
        for p in ranks:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()
    assert results == {0: ["measured"], 1: ["measured"]}
