"""The library engine's calls, end to end on CPU: two gloo ranks, the fake binding (tests/library_fake.py),
the communicator's unique id through the job's own c10d store, and the torch engine's exact-data check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ddplab
from ddplab import collectives

ROOT = Path(__file__).resolve().parents[2]  # for tests.library_fake
PACKAGE_ROOT = str(Path(ddplab.__file__).resolve().parents[1])  # the ranks run the ddplab under test
RANK_PROGRAM = Path(__file__).with_name("library_fake_rank.py")


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    import torch.distributed as dist

    out = tmp_path_factory.mktemp("library-engine")
    store = dist.TCPStore("127.0.0.1", 0, 3, is_master=True, wait_for_workers=False)  # loopback, any free port
    env = dict(os.environ, WORLD_SIZE="2", DDPLAB_TEST_STORE_PORT=str(store.port), GLOO_SOCKET_IFNAME="lo",
               DDPLAB_LIBRARY_BINDING="tests.library_fake:GlooBinding",
               PYTHONPATH=os.pathsep.join([PACKAGE_ROOT, str(ROOT), os.environ.get("PYTHONPATH", "")]))
    ranks = [subprocess.Popen([sys.executable, str(RANK_PROGRAM), str(out / f"rank{r}.json")],
                              env={**env, "RANK": str(r)}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(2)]
    try:
        logs = [p.communicate(timeout=180)[0] for p in ranks]
    finally:
        for p in ranks:
            p.kill()
            p.wait()
    for r, (p, log) in enumerate(zip(ranks, logs)):
        assert p.returncode == 0, f"rank {r} exited {p.returncode}:\n{log}"
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


@pytest.mark.slow
def test_the_communicator_id_came_through_the_job_store_once(two_ranks):
    ids = [r["unique_ids"] for r in two_ranks]
    assert len(ids[0]) == 1 and ids[0] == ids[1], "both ranks must join with the id rank 0 made"
    assert not any(r["key_left_in_store"] for r in two_ranks), "the id's key is deleted once everyone joined"
    assert [r["describe"]["rank"] for r in two_ranks] == [0, 1]
    assert {r["binding"] for r in two_ranks} == {"gloo-fake"}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(collectives.COLLECTIVES))
def test_library_calls_produce_exactly_what_the_torch_engine_checks(two_ranks, name):
    for rank, result in enumerate(two_ranks):
        rows = result["checks"][name]
        assert len(rows) == 3 * len(collectives.get(name).placements)
        for row in rows:
            assert row["wrong"] == 0, f"rank {rank} {name} {row}"
    # Negative control: unrun, the check finds wrong elements somewhere, so a zero above means the calls ran.
    for row in zip(*(r["checks"][name] for r in two_ranks)):
        assert sum(x["wrong_unrun"] for x in row) > 0, f"{name} {row}: the check cannot tell"


@pytest.mark.slow
def test_the_communicator_times_pipelined_and_blocking(two_ranks):
    for result in two_ranks:
        assert result["timing"]["pipelined_us"] > 0
        assert result["timing"]["blocking_n"] == 5
