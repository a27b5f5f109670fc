"""A user's job for scripts/device/ctrl_c_gpu.sh: NCCL on the GPU, one all_reduce, then either idle in user code
(`idle`) or all_reduces back to back (`busy`) until the launcher is stopped. Writes ready.<rank> once it got there."""

import os
import sys
import time

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
tensor = torch.ones(1024, device="cuda")
dist.all_reduce(tensor)
torch.cuda.synchronize()
open(f"ready.{rank}", "w").close()
if sys.argv[1] == "idle":
    time.sleep(600)
while True:
    dist.all_reduce(tensor)
