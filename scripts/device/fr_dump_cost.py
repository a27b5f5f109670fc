"""What the beacon's status read costs a rank, per 0.5 s poll (supervision/beacon.py polls StatusReader.read()):
one rank, the image's NCCL, the recorder's buffer full (3,000 all_reduces into 2,000 entries), then 200 timed reads
each way. Under TORCH_NCCL_BLOCKING_WAIT=1 no group has a count, so every read also dumps the active entries
(platform/flight_recorder.py StatusReader); without it the read is the status alone. Also: a storm of 4-byte
all_reduces alone, and again with a side thread reading the status every 0.5 s as the beacon does.

    TORCH_NCCL_BLOCKING_WAIT=1 torchrun --nproc-per-node 1 scripts/device/fr_dump_cost.py
"""

import json
import os
import statistics
import threading
import time

import torch
import torch.distributed as dist

from ddplab.platform.flight_recorder import StatusReader, read

torch.cuda.set_device(0)
dist.init_process_group("nccl")
tensor = torch.ones(1, device="cuda")
for _ in range(3000):
    dist.all_reduce(tensor)
torch.cuda.synchronize()


def timed(fn, n=200):
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return {"median_ms": round(statistics.median(samples), 3), "max_ms": round(max(samples), 3)}


reader = StatusReader()
result = {"blocking_wait": os.environ.get("TORCH_NCCL_BLOCKING_WAIT", "0"), "nccl": torch.cuda.nccl.version(),
          "status_only": timed(lambda: read(include_collectives=False)),
          "beacon_read": timed(reader.read),
          "active_dump": timed(lambda: read(include_collectives=True, only_active=True)),
          "counts": (reader.read() or {}).get("pg_status")}


def storm(n=20000):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        dist.all_reduce(tensor)
    torch.cuda.synchronize()
    return round((time.perf_counter() - t0) / n * 1e6, 2)


stop = threading.Event()


def beacon():
    while not stop.wait(0.5):
        reader.read()


result["storm_us_alone"] = [storm() for _ in range(3)]
side = threading.Thread(target=beacon, daemon=True)
side.start()
result["storm_us_with_reads_every_0.5s"] = [storm() for _ in range(3)]
stop.set()
side.join()
print("fr_dump_cost", json.dumps(result))
dist.destroy_process_group()
