"""Real-code variants the fault table does not run, for probing the judge beyond its list: DDP with a compiled
model, a communication hook, a static graph, activation checkpointing, Python-level object collectives beside it,
DDP's Join for uneven inputs (healthy), and FSDP1. The victim rank stalls (sleeps), spins in a busy loop, or is slow
at every step (--fault), while the others go on into the next gradient reduction, issued from C++ in backward().

    ddplab launch --nproc-per-node 3 --hang-timeout 5 --out DIR -- scripts/probes/real_code_variants.py \
        --variant comm_hook [--fault stall|busy|slow|none] [--victim 1]

Results: docs/fault-table.md, "Beyond the table"."""
import argparse, os, time
import torch, torch.distributed as dist, torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--variant", required=True)
p.add_argument("--steps", type=int, default=40)
p.add_argument("--fault-step", type=int, default=8)
p.add_argument("--victim", type=int, default=1)
p.add_argument("--fault", default="stall")  # stall | none
a = p.parse_args()
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
v = a.variant
if v == "compile":
    from torch.nn.parallel import DistributedDataParallel as DDP
    net = torch.compile(DDP(model), backend="aot_eager")
elif v == "comm_hook":
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    net = DDP(model); net.register_comm_hook(None, default_hooks.fp16_compress_hook)
elif v == "static_graph":
    from torch.nn.parallel import DistributedDataParallel as DDP
    net = DDP(model, static_graph=True)
elif v == "fsdp1":
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    net = FSDP(model)
elif v == "checkpoint":
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.checkpoint import checkpoint
    class C(nn.Module):
        def __init__(s, m): super().__init__(); s.m = m
        def forward(s, x): return checkpoint(s.m, x, use_reentrant=False)
    net = DDP(C(model))
elif v == "join":  # uneven inputs handled by DDP's Join: healthy, must pass
    from torch.nn.parallel import DistributedDataParallel as DDP
    net = DDP(model)
elif v == "object_collective":  # the others wait in all_gather_object, a Python-level collective on pickles
    from torch.nn.parallel import DistributedDataParallel as DDP
    net = DDP(model)
else:
    raise SystemExit(f"unknown variant {v}")
opt = torch.optim.SGD(net.parameters(), lr=0.01)

def step(i):
    x = torch.randn(32, 256); y = torch.randint(0, 10, (32,))
    opt.zero_grad(); nn.functional.cross_entropy(net(x), y).backward(); opt.step()

if v == "join":
    from torch.distributed.algorithms.join import Join
    n = a.steps + (5 if rank == a.victim else 0)
    with Join([net]):
        for i in range(n):
            step(i); time.sleep(0.02)
else:
    for i in range(a.steps):
        if a.fault == "stall" and i == a.fault_step and rank == a.victim:
            print(f"[rank {rank}] injecting fault: stall at {time.time():.3f}", flush=True)
            if a.fault == "stall":
                time.sleep(3600)
        if a.fault == "busy" and i == a.fault_step and rank == a.victim:
            print(f"[rank {rank}] injecting fault: busy loop at {time.time():.3f}", flush=True)
            while True:
                sum(range(1000))
        if a.fault == "slow" and rank == a.victim:
            time.sleep(0.3)
        if v == "object_collective" and i % 5 == 0:
            dist.all_gather_object([None] * dist.get_world_size(), {"step": i, "rank": rank})
        step(i); time.sleep(0.02)
print(f"[rank {rank}] finished", flush=True)
dist.destroy_process_group()
