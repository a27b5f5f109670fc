"""Why did the oom drill's victim not fail on NCCL? Time a capped over-allocation, alone and
inside a NCCL group, with a stack dump if it takes longer than 5 s."""
import faulthandler
import os
import sys
import time

import torch

faulthandler.dump_traceback_later(5, exit=False)
rank = int(os.environ.get("RANK", "0"))
torch.cuda.set_device(rank if os.environ.get("PER_DEVICE") else 0)
if os.environ.get("WORLD_SIZE"):
    import torch.distributed as dist
    dist.init_process_group("nccl", device_id=torch.device("cuda", torch.cuda.current_device()))
    b = torch.ones(1024, device="cuda")
    for _ in range(5):
        dist.all_reduce(b)
    torch.cuda.synchronize()
torch.cuda.set_per_process_memory_fraction(0.25, torch.cuda.current_device())
total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
t = time.time()
try:
    torch.empty(int(0.25 * total) + (1 << 30), dtype=torch.uint8, device="cuda")
    print(rank, "allocated?!", flush=True)
except Exception as e:
    print(rank, type(e).__name__, str(e)[:400], flush=True)
print(rank, "took", round(time.time() - t, 2), "s", flush=True)
faulthandler.cancel_dump_traceback_later()
sys.stdout.flush()
os._exit(0)
