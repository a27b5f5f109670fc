"""One rank, plain torch and its own NCCL, TORCH_NCCL_BLOCKING_WAIT=1: does the flight recorder still record a
collective that is not done yet, while the per-group status stays at -1? (platform/flight_recorder.py
``StatusReader`` counts from those entries.) A long matmul chain ahead of the all_reduce on the same stream keeps
it going for a while.

    TORCH_NCCL_BLOCKING_WAIT=1 torchrun --nproc-per-node 1 scripts/device/blocking_wait_recorder.py
"""

import json
import os

import torch
import torch.distributed as dist

torch.cuda.set_device(0)
dist.init_process_group("nccl")
c10d = torch._C._distributed_c10d
tensor = torch.ones(4, device="cuda")
dist.all_reduce(tensor)
torch.cuda.synchronize()
a = torch.randn(8192, 8192, device="cuda")
for _ in range(200):  # about 0.2 s of work queued ahead of the collective
    a = a @ a / 8192
work = dist.all_reduce(tensor, async_op=True)
status = json.loads(c10d._dump_nccl_trace_json(False, False))["pg_status"]
active = json.loads(c10d._dump_nccl_trace_json(True, True)).get("entries", [])
work.wait()
torch.cuda.synchronize()
after = json.loads(c10d._dump_nccl_trace_json(True, True)).get("entries", [])
every = json.loads(c10d._dump_nccl_trace_json(True, False)).get("entries", [])
print(json.dumps({"blocking_wait": os.environ.get("TORCH_NCCL_BLOCKING_WAIT"), "nccl": torch.cuda.nccl.version(),
                  "status_while_going": status,
                  "active_while_going": [(e["collective_seq_id"], e["state"]) for e in active],
                  "active_after": [(e["collective_seq_id"], e["state"]) for e in after],
                  "recorded": [(e["collective_seq_id"], e["state"]) for e in every]}))
dist.destroy_process_group()
