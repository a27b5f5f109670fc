"""One gloo rank of test_library_engine_cpu.py: every collective through the library engine's calls.

Joins the test's TCPStore (DDPLAB_TEST_STORE_PORT), opens the binding DDPLAB_LIBRARY_BINDING names,
makes a communicator the way the library engine will, and for every collective, placement and
dtype: fills the torch engine's buffers, checks them unrun (the negative control), issues the
library calls, checks again. Writes what it saw as JSON to argv[1].
"""

import json
import os
import sys

import torch
import torch.distributed as dist

from ddplab import collectives, platform
from ddplab.collectives.common import torch_dtype
from ddplab.platform import library_binding
from ddplab.workloads.common import blocking_us, pipelined_us

SIZE = 96 * 4  # bytes: whole chunks for 2 ranks in every dtype


def main(out_path: str) -> None:
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    store = dist.TCPStore("127.0.0.1", int(os.environ["DDPLAB_TEST_STORE_PORT"]), world_size, is_master=False)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size)
    binding = library_binding.open_binding(platform.detect(with_memory=False))
    comm = binding.communicator(device_index=None)
    checks = {name: _check_collective(comm, name, rank, world_size) for name in collectives.COLLECTIVES}
    issue = comm.bind(collectives.get("all_reduce").prepare(1, world_size, rank, torch.float32,
                                                            torch.device("cpu"), True).library)
    timing = {"pipelined_us": pipelined_us(issue, comm, 20), "blocking_n": len(blocking_us(issue, comm, 5))}
    key = f"ddplab/library-binding/{dist.group.WORLD.group_name}/0/unique-id"
    result = {"binding": binding.name, "describe": comm.describe(), "unique_ids": [u.hex() for u in
                                                                                    binding.adapter.unique_ids],
              "key_left_in_store": library_binding.group_store().check([key]), "checks": checks, "timing": timing}
    comm.close()
    dist.destroy_process_group()
    with open(out_path, "w") as f:
        json.dump(result, f)


def _check_collective(comm, name, rank, world_size) -> list[dict]:
    spec = collectives.get(name)
    rows = []
    for dtype in ("float", "bfloat16", "int32"):
        elem = torch.tensor([], dtype=torch_dtype(dtype)).element_size()
        count = spec.count_for(SIZE, world_size, elem)
        for in_place in spec.placements:
            prepared = spec.prepare(count, world_size, rank, torch_dtype(dtype), torch.device("cpu"), in_place)
            issue = comm.bind(prepared.library)
            prepared.fill()
            unrun = prepared.wrong()
            prepared.fill()
            comm.follow_framework()
            issue()
            comm.synchronize()
            rows.append({"dtype": dtype, "in_place": in_place, "wrong_unrun": unrun, "wrong": prepared.wrong()})
    return rows


if __name__ == "__main__":
    main(sys.argv[1])
