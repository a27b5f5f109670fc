"""Plain torch, no ddplab: does a blocking wait time out while a peer stalls, with and without a side thread
polling the flight recorder the way ddplab's beacon does?  (docs/RESULTS.md, "the stall drill under blocking
wait"; the full profile's stall drill with TORCH_NCCL_BLOCKING_WAIT=1 was never ended on one H200, NCCL 2.30.7.)

    torchrun --nproc-per-node 2 scripts/device/stall_probe.py [--poll] [--stall-s 40] [--timeout 10]

Rank 1 sleeps --stall-s before its all_reduce; rank 0 waits in its own. A "beat" line every 2 s from a side thread
shows that rank's GIL is free; --poll adds a thread calling the recorder's status dump every 0.5 s (ddplab's
beacon, platform/flight_recorder.py) and prints any call that took over 0.1 s.
"""

import argparse
import datetime
import os
import threading
import time

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--poll", action="store_true")
parser.add_argument("--stall-s", type=float, default=40.0)
parser.add_argument("--timeout", type=float, default=10.0)
args = parser.parse_args()
rank = int(os.environ["RANK"])
t0 = time.time()


def log(message: str) -> None:
    print(f"[{time.time() - t0:6.2f} s] rank {rank}: {message}", flush=True)


torch.cuda.set_device(0)
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=args.timeout))
tensor = torch.ones(4, device="cuda")
dist.all_reduce(tensor)
torch.cuda.synchronize()
log(f"first all_reduce done; TORCH_NCCL_BLOCKING_WAIT={os.environ.get('TORCH_NCCL_BLOCKING_WAIT')}, poll={args.poll}")


def beat() -> None:
    while True:
        time.sleep(2)
        log("beat")


def poll() -> None:
    dumper = torch._C._distributed_c10d._dump_nccl_trace_json
    while True:
        started = time.time()
        dumper(False, False)
        took = time.time() - started
        if took > 0.1:
            log(f"recorder status dump took {took:.2f} s")
        time.sleep(0.5)


threading.Thread(target=beat, daemon=True).start()
if args.poll:
    threading.Thread(target=poll, daemon=True).start()
if rank == 1:
    log(f"stalls {args.stall_s} s")
    time.sleep(args.stall_s)
log("enters all_reduce")
try:
    dist.all_reduce(tensor)
    torch.cuda.synchronize()
    log("all_reduce returned")
except Exception as exc:  # noqa: BLE001 - what the wait raised is the finding
    log(f"all_reduce raised {type(exc).__name__}: {str(exc)[:300]}")
    os._exit(1)
dist.destroy_process_group()
log("done")
