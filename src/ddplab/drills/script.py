"""The seed's DDP training, broken on purpose: what every fault drill runs, through the same path as the user's own
script under `ddplab launch` (job/boot.py and one supervisor). A drill that passes proves what a user's DDP job
gets.

    ddplab launch --nproc-per-node 3 --hang-timeout 10 -- -m ddplab.drills.script --fault stall --victim 1

Each step is workloads/ddp_train.py's: zero_grad, forward, backward (where DDP's reducer, or FSDP2's hooks, reduce
the gradients from C++), optimizer step, on batches from a DataLoader. ``--wrap fsdp2`` shards the model with
fully_shard; ``--accumulate N`` accumulates N micro-batches per step, the first N-1 under DDP's no_sync.

It reports nothing of itself to ddplab: the supervisor sees it as it sees any script (the beacon's view of the
main thread, the flight recorder, its exit). It only says, for the drills' and the fault table's measurements,
what it injected and when (drills/faults.py) and, at the end, the time of each step and of its whole training loop
(ranks/<rank>/drill-result.json). Neither is evidence the judge reads.

The faults are drills/faults.py's, and three that need a collective of the script's own:
  skip_continue     the victim skips one step's gradient reduction (no_sync) and goes on: it ends one collective
                    short, where the others wait
  mismatch          every step every rank all_reduces a metric (as a loop that logs its loss does); at
                    --fault-step the victim's is twice the size
  desync            the same metric; at --fault-step the victim broadcasts it instead

Placement (backend, device, memory cap) comes from DDPLAB_DRILL_PLACEMENT when a drill plans it; otherwise the
accelerator's default backend, or gloo on the host, as a typical torchrun script would choose.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from datetime import timedelta

from ..basics.rundir import PLACEMENT_ENV
from . import faults as fault_table

COLLECTIVE_FAULTS = ("skip_continue", "mismatch", "desync")
FAULTS = (*fault_table.FAULTS, *COLLECTIVE_FAULTS)
RESULT_FILE = "drill-result.json"
METRIC_NUMEL = 4
TIME_CHECK_STEPS = 20  # --seconds: how often rank 0's clock is asked (one broadcast)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ddplab.drills.script", description=__doc__.splitlines()[0])
    fault_table.add_arguments(parser, FAULTS)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=None,
                        help="stop after this long in the training loop (rank 0 decides), whatever --steps says")
    parser.add_argument("--wrap", choices=("ddp", "fsdp2"), default="ddp")
    parser.add_argument("--accumulate", type=int, default=1, help="micro-batches per step (no_sync for all but one)")
    parser.add_argument("--width", type=int, default=32, help="the model's width (workloads/ddp_train.py's MLP)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--interval", type=float, default=0.01, help="seconds of host work per step")
    parser.add_argument("--timeout", type=float, default=None, help="init_process_group's timeout, seconds")
    return parser.parse_args(argv)


def _write(name: str, value) -> None:
    """A file for the drill's measurements in its rank's directory; a drill run outside ddplab has none."""
    run_dir = os.environ.get("DDPLAB_RUN_DIR")
    if not run_dir:
        return
    folder = os.path.join(run_dir, "ranks", os.environ.get("RANK", "0"))
    with contextlib.suppress(OSError):
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
        with open(tmp, "w") as f:
            json.dump(value, f)
        os.replace(tmp, os.path.join(folder, name))


def _device_and_backend():
    """(device, backend, memory cap in bytes or None), from the drill's plan or as a typical script decides."""
    import torch
    import torch.distributed as dist

    plan = json.loads(os.environ.get(PLACEMENT_ENV) or "{}")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if plan:
        from ddplab.platform import DeviceRuntime

        runtime = DeviceRuntime(plan["device_type"], plan["devices"][local_rank])
        runtime.activate()
        runtime.cap_memory(plan.get("memory_fraction"))
        return runtime.device, plan["backend"], runtime.allocator_cap_bytes()
    accelerator = torch.accelerator.current_accelerator() if hasattr(torch, "accelerator") else None
    if accelerator is not None:  # several ranks share the devices there are (NCCL >= 2.30 takes them)
        index = local_rank % torch.accelerator.device_count()
        torch.accelerator.set_device_index(index)
        device = torch.device(accelerator.type, index)
        return device, dist.get_default_backend_for_device(device), None
    return torch.device("cpu"), "gloo", None


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    faults = fault_table.Faults(args)
    faults.at_start()
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader

    from ddplab.workloads.ddp_train import Trainer, build_model

    device, backend, cap = _device_and_backend()
    faults.before_init()
    kwargs = {"timeout": timedelta(seconds=args.timeout)} if args.timeout else {}
    dist.init_process_group(backend, **kwargs)
    model, features = build_model("mlp", faults.model_width(args.width))
    trainer = Trainer(model, device, wrap=args.wrap, device_ids=None if device.type == "cpu" else [device.index])
    faults.watch_backward(trainer.module)
    data = faults.dataset(faults.batches(args.steps) * args.accumulate, args.batch, features)
    batches = iter(DataLoader(data, batch_size=args.batch, num_workers=faults.loader_workers()))
    step_times_us = []
    loop_started = time.perf_counter()
    deadline = time.monotonic() + args.seconds if args.seconds else None
    for step in range(args.steps):
        if deadline is not None and step % TIME_CHECK_STEPS == 0 and _time_is_up(deadline, device):
            break
        time.sleep(args.interval)  # the host's share of a step: logging, data preparation
        if faults.at_step(step, device, cap) == "stop":
            break
        started = time.perf_counter()
        if not _train_step(trainer, batches, args, faults, step, device):
            faults.data_ended(step)
            break
        _collective_fault(faults, step, device)
        if device.type != "cpu":
            torch.accelerator.synchronize(device)
        step_times_us.append((time.perf_counter() - started) * 1e6)
    _write(RESULT_FILE, {"latencies_us": step_times_us, "loop_s": time.perf_counter() - loop_started})
    print(f"[rank {faults.rank}] finished {len(step_times_us)} steps", flush=True)
    from ddplab.job.worker import settle_before_destroying_gloo

    settle_before_destroying_gloo()  # torch < 2.8 could deadlock destroying a gloo group
    dist.destroy_process_group()
    faults.at_exit()


def _time_is_up(deadline: float, device) -> bool:
    """Rank 0's clock, broadcast: every rank leaves the loop at the same step."""
    import torch
    import torch.distributed as dist

    up = torch.tensor([time.monotonic() >= deadline], dtype=torch.int32, device=device)
    dist.broadcast(up, src=0)
    return bool(up.item())


def _train_step(trainer, batches, args: argparse.Namespace, faults: fault_table.Faults, step: int, device) -> bool:
    """One optimizer step over --accumulate micro-batches; False where the data ran out."""
    skip_sync = faults.mine("skip_continue") and step == args.fault_step
    if skip_sync:
        fault_table.announce(faults.rank, f"skipped the gradient reduction of step {step} (no_sync)")
    for micro in range(args.accumulate):
        try:
            x, _ = next(batches)
        except StopIteration:
            return False
        trainer.backward(x.to(device), sync=micro == args.accumulate - 1 and not skip_sync)
    trainer.update()
    return True


def _collective_fault(faults: fault_table.Faults, step: int, device) -> None:
    """For a fault that needs one, every rank reduces a metric every step; at --fault-step the victim's differs."""
    if faults.fault not in ("mismatch", "desync"):
        return
    import torch
    import torch.distributed as dist

    numel = METRIC_NUMEL
    if step != faults.fault_step or not faults.is_victim:
        dist.all_reduce(torch.ones(numel, device=device))
        return
    if faults.mine("mismatch"):
        numel = 2 * METRIC_NUMEL
        fault_table.announce(faults.rank, f"all_reduce of {numel} elements where the others send {METRIC_NUMEL}")
    metric = torch.ones(numel, device=device)
    if faults.mine("desync"):
        fault_table.announce(faults.rank, f"broadcast of {numel} elements where the others all_reduce")
        dist.broadcast(metric, src=0)
    else:
        dist.all_reduce(metric)


if __name__ == "__main__":
    main()
