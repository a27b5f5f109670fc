"""The seed's DDP training, broken on purpose: what every fault drill runs, through the same path as the user's own
script under `ddplab launch`, so a drill that passes proves what a user's DDP job gets.

    ddplab launch --nproc-per-node 3 --hang-timeout 10 -- -m ddplab.drills.script --fault stall --victim 1

Each step is workloads/ddp_train.py's (``--wrap fsdp2``: fully_shard; ``--accumulate N``: N-1 micro-batches under
no_sync). It tells ddplab nothing of itself: it only says what it injected and when, and its step times
(drill-result.json), for the measurements; the judge reads neither. The faults are faults.py's, and three that
need a collective of its own: skip_continue (one step's reduction skipped: one collective short), mismatch (a
metric all_reduce twice the size), desync (the metric broadcast instead). Placement comes from
DDPLAB_DRILL_PLACEMENT when a drill plans it, else as a typical torchrun script would choose.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import time
from datetime import timedelta
from pathlib import Path

from ..basics.files import write_text_atomic
from ..basics.rundir import PLACEMENT_ENV, RUN_DIR_ENV
from ..errors import DdplabError
from ..platform.runtime import DeviceRuntime, device_for_local_rank, synchronize_device
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
    run_dir = os.environ.get(RUN_DIR_ENV)
    if not run_dir:
        return
    with contextlib.suppress(DdplabError):
        write_text_atomic(Path(run_dir, "ranks", os.environ.get("RANK", "0"), name), json.dumps(value),
                          durable=False, make_parents=True)


def _device_and_backend():
    """(device, backend, memory cap in bytes or None), from the drill's plan or as a typical script decides."""
    plan = json.loads(os.environ.get(PLACEMENT_ENV) or "{}")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if plan:
        runtime = DeviceRuntime(plan["device_type"], plan["devices"][local_rank])
        runtime.activate()
        runtime.cap_memory(plan.get("memory_fraction"))
        return runtime.device, plan["backend"], runtime.allocator_cap_bytes()
    # several ranks share the devices there are (NCCL >= 2.30 takes them)
    device, backend = device_for_local_rank(local_rank)
    return device, backend, None


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    faults = fault_table.Faults(args)
    faults.at_start()
    import torch.distributed as dist

    from ddplab.workloads.ddp_train import Trainer, build_model

    device, backend, cap = _device_and_backend()
    faults.before_init()
    kwargs = {"timeout": timedelta(seconds=args.timeout)} if args.timeout else {}
    dist.init_process_group(backend, **kwargs)
    model, features = build_model("mlp", faults.model_width(args.width))
    trainer = Trainer(model, device, wrap=args.wrap, device_ids=None if device.type == "cpu" else [device.index])
    faults.watch_backward(trainer.module)
    batches = iter(faults.loader(args.steps, args.batch, features, per_step=args.accumulate))
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
        synchronize_device(device)
        step_times_us.append((time.perf_counter() - started) * 1e6)
    _write(RESULT_FILE, {"latencies_us": step_times_us, "loop_s": time.perf_counter() - loop_started})
    print(f"[rank {faults.rank}] finished {len(step_times_us)} steps", flush=True)
    from ddplab.job.worker import settle_before_destroying_gloo

    settle_before_destroying_gloo()  # torch < 2.8 could deadlock destroying a gloo group
    dist.destroy_process_group()
    faults.at_exit()
    if argv is None:  # the rank's program: its exit need not collect torch's objects (about 0.25 s, cli.py)
        gc.freeze()


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
