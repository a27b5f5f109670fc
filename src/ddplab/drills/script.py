"""A small training loop that breaks on purpose: what every fault drill runs, through the same path as the user's
own script under `ddplab launch` (job/boot.py and one supervisor). A drill that passes proves what users get.

    ddplab launch --nproc-per-node 3 --hang-timeout 10 -- -m ddplab.drills.script --fault exit --victim 1

It reports nothing of itself to ddplab: the supervisor sees it as it sees any script (the beacon's view of the
main thread, the flight recorder, its exit). It only says, for the drill's and the fault table's measurements,
what it injected and when (a note in its beacon's status, where ddplab started it, and a line on stdout) and, at
the end, the latency of each collective it issued (ranks/<rank>/drill-result.json). Neither is evidence the
judge reads.

Faults the victim injects itself (``--fault``); kills, pauses, Ctrl+C and the launcher's death come from outside:
  none              a healthy loop
  skip              stops issuing collectives at --fault-step and finishes its script early (exit 0)
  skip_continue     skips one all_reduce at --fault-step, then goes on: it ends one collective short
  mismatch          its all_reduce at --fault-step is twice the size of the others'
  desync            from --fault-step on, broadcasts twice the size while the others all_reduce
  raise             raises ValueError in its own code at --fault-step
  exit              os._exit(3) at --fault-step: no traceback, no error file
  segv              a segmentation fault at --fault-step
  stall             stops issuing collectives for --stall-s at --fault-step (user code, heartbeat alive)
  deadlock          takes a lock it already holds at --fault-step: stuck in its own code for ever
  late              sleeps --late-s before init_process_group
  syntax            a SyntaxError before init_process_group (code compiled at start)
  oom               allocates 1 GiB beyond its memory cap (the device allocator's, or a cap on its address space)
  grandchild_term   starts a child that ignores SIGTERM, then raises at --fault-step
  grandchild_session  starts a child in a session of its own (setsid), then raises at --fault-step
  helper            starts a child in a session of its own that ignores SIGTERM, and goes on (for faults from
                    outside: the launcher's death, Ctrl+C)

Placement (backend, device, memory cap) comes from DDPLAB_DRILL_PLACEMENT when a drill plans it; otherwise the
accelerator's default backend, or gloo on the host, as a typical torchrun script would choose.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from datetime import timedelta

PLACEMENT_ENV = "DDPLAB_DRILL_PLACEMENT"
FAULTS = ("none", "skip", "skip_continue", "mismatch", "desync", "raise", "exit", "segv", "stall", "deadlock", "late",
          "syntax", "oom", "grandchild_term", "grandchild_session", "helper")
RESULT_FILE = "drill-result.json"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ddplab.drills.script", description=__doc__.splitlines()[0])
    parser.add_argument("--fault", choices=FAULTS, default="none")
    parser.add_argument("--victim", type=int, default=1, help="the global rank that misbehaves")
    parser.add_argument("--fault-step", type=int, default=5, help="the step at which the victim misbehaves")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--interval", type=float, default=0.01, help="seconds of 'compute' per step")
    parser.add_argument("--numel", type=int, default=1024)
    parser.add_argument("--late-s", type=float, default=60.0)
    parser.add_argument("--stall-s", type=float, default=120.0)
    parser.add_argument("--timeout", type=float, default=None, help="init_process_group's timeout, seconds")
    parser.add_argument("--ignore-sigterm", action="store_true", help="every rank ignores SIGTERM")
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


def announce(rank: int, what: str) -> None:
    at = time.time()
    with contextlib.suppress(ImportError):
        from ddplab.supervision.beacon import current

        beacon = current()
        if beacon is not None:  # the drill reads it there, on every machine of the job
            beacon.note(injected=what, injected_at=at)
    print(f"[rank {rank}] injecting fault: {what} at {at:.3f}", flush=True)


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
    rank = int(os.environ.get("RANK", "0"))
    if args.ignore_sigterm:
        import signal

        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    victim = rank == args.victim
    if victim and args.fault == "syntax":
        announce(rank, "a SyntaxError at start")
        compile("def broken(:\n    pass\n", "plugin.py", "exec")
    import torch
    import torch.distributed as dist

    device, backend, cap = _device_and_backend()
    if victim and args.fault == "late":
        announce(rank, f"sleeping {args.late_s} s before init_process_group")
        time.sleep(args.late_s)
    kwargs = {"timeout": timedelta(seconds=args.timeout)} if args.timeout else {}
    dist.init_process_group(backend, **kwargs)
    grad = torch.ones(args.numel, device=device)
    latencies_us = []
    for step in range(args.steps):
        time.sleep(args.interval)  # forward and backward
        op, numel = "all_reduce", args.numel
        if victim and step == args.fault_step:
            if _inject(rank, args, device, cap) == "skip":
                continue
        if victim and args.fault == "skip" and step >= args.fault_step:
            break
        if victim and args.fault == "mismatch" and step == args.fault_step:
            numel = 2 * args.numel
        if victim and args.fault == "desync" and step >= args.fault_step:
            op, numel = "broadcast", 2 * args.numel
        tensor = grad if numel == args.numel else torch.ones(numel, device=device)
        started = time.perf_counter()
        if op == "broadcast":
            dist.broadcast(tensor, src=0)
        else:
            dist.all_reduce(tensor)
        if device.type != "cpu":
            torch.accelerator.synchronize(device)
        latencies_us.append((time.perf_counter() - started) * 1e6)
        grad.fill_(1.0)
    _write(RESULT_FILE, {"latencies_us": latencies_us})
    print(f"[rank {rank}] finished {args.steps} steps", flush=True)
    from ddplab.worker import settle_before_destroying_gloo

    settle_before_destroying_gloo()  # torch < 2.8 could deadlock destroying a gloo group
    dist.destroy_process_group()


def _inject(rank: int, args: argparse.Namespace, device, cap: int | None) -> str | None:
    """The victim's own fault at --fault-step; "skip" when this step's collective is to be skipped."""
    fault = args.fault
    if fault == "skip":
        announce(rank, f"stops issuing collectives at step {args.fault_step} and finishes early")
    elif fault == "skip_continue":
        announce(rank, f"skipped the all_reduce of step {args.fault_step}")
        return "skip"
    elif fault == "mismatch":
        announce(rank, f"all_reduce of {2 * args.numel} elements where the others send {args.numel}")
    elif fault == "desync":
        announce(rank, f"switched to broadcast of {2 * args.numel} elements")
    elif fault == "raise":
        announce(rank, "raising ValueError")
        raise ValueError(f"corrupt sample in shard {rank} at step {args.fault_step}")
    elif fault == "exit":
        announce(rank, "os._exit(3)")
        os._exit(3)
    elif fault == "segv":
        import ctypes

        announce(rank, "a segmentation fault")
        ctypes.string_at(0)
    elif fault == "stall":
        announce(rank, f"stopped issuing collectives for {args.stall_s} s")
        time.sleep(args.stall_s)
    elif fault == "deadlock":
        announce(rank, "took a lock it already holds")
        lock = threading.Lock()
        lock.acquire()
        lock.acquire()
    elif fault == "oom":
        _out_of_memory(rank, device, cap)
    elif fault in ("grandchild_term", "grandchild_session", "helper"):
        own_session, ignores_term = fault != "grandchild_term", fault != "grandchild_session"
        helper = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
                  if ignores_term else "import time; time.sleep(600)")
        child = subprocess.Popen([sys.executable, "-c", helper], start_new_session=own_session)
        how = ", ".join(w for w, yes in (("its own session", own_session), ("ignores SIGTERM", ignores_term)) if yes)
        if fault == "helper":
            announce(rank, f"started pid {child.pid} ({how}) and goes on")
            return None
        announce(rank, f"started pid {child.pid} ({how}), then raising")
        raise RuntimeError(f"rank {rank} failed after starting helper pid {child.pid}")
    return None


def _out_of_memory(rank: int, device, cap: int | None) -> None:
    import torch

    if device.type != "cpu":
        cap = cap or 0
        announce(rank, f"allocating {cap + (1 << 30)} bytes against a cap of {cap}")
        torch.empty(cap + (1 << 30), dtype=torch.uint8, device=device)
        return
    import resource

    cap = 256 << 20
    announce(rank, f"allocating {cap + (1 << 30)} bytes against a cap of {cap} on its address space")
    with open("/proc/self/statm") as f:
        vm_bytes = int(f.read().split()[0]) * resource.getpagesize()
    previous = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (vm_bytes + cap, previous[1]))
    try:
        torch.empty(cap + (1 << 30), dtype=torch.uint8)
    except RuntimeError as exc:
        resource.setrlimit(resource.RLIMIT_AS, previous)  # let the rest of the rank report the failure
        raise MemoryError(f"out of memory: tried to allocate {cap + (1 << 30)} bytes over this rank's cap of "
                          f"{cap} bytes ({exc})") from exc


if __name__ == "__main__":
    main()
