"""What every example does first, as a typical torchrun script would: join the job described by
torchrun's environment (env://), on this local rank's GPU when there is one (NCCL; with more ranks than
GPUs, ranks share them round-robin, which NCCL >= 2.30 allows with NCCL_MULTI_RANK_GPU_ENABLE=1), else on
the CPU (gloo). Each example imports it from its own directory, so running one also checks that the
launcher put the script's directory first on sys.path, as `python script.py` does.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist


def setup() -> tuple[int, int, torch.device]:
    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    dist.init_process_group(backend)
    return dist.get_rank(), dist.get_world_size(), device


def fault_arguments(description: str) -> argparse.ArgumentParser:
    """The knobs every broken example shares: when the fault happens, and on which rank."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--fault-step", type=int, default=3, help="step at which the victim misbehaves")
    parser.add_argument("--victim", type=int, default=1, help="the rank that misbehaves")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds of 'compute' per step")
    parser.add_argument("--numel", type=int, default=1024, help="elements in the gradient all_reduced each step")
    return parser


def announce(rank: int, what: str) -> None:
    """One line the tests read: which fault, on which rank, at what wall time."""
    print(f"[rank {rank}] injecting fault: {what} at {time.time():.3f}", flush=True)


def finish(rank: int, steps: int) -> None:
    print(f"[rank {rank}] finished {steps} steps", flush=True)
    dist.destroy_process_group()
