"""The faults a drill injects into training code: one table for every code the fault table runs (plain DDP, DDP
with gradient accumulation, FSDP2, Lightning, Accelerate), each fault at the point where users meet it.

A training code calls the hooks (``at_start``, ``before_init``, ``model_width``, ``loader``, ``watch_backward``,
``at_step``) at its own points; the victim injects, the others run on. ``announce`` says what and when on stdout
and in the beacon: the fault table measures detection from it, the judge never reads it. Faults from outside the
rank are fault_table.py's to send; hand-written collective faults are drills/script.py's.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

from ..platform.runtime import synchronize_device

# fault -> what the victim does, in the words of the fault table
FAULTS = {
    "none": "nothing: a healthy run",
    "syntax": "a SyntaxError at start, before init",
    "hang_in_import": "its code hangs inside an import, before init",
    "stop_in_import": "stopped (SIGSTOP) inside an import, before init",
    "late": "sleeps --late-s before init_process_group",
    "param_mismatch": "builds its model with another width than the others",
    "loader_stall": "its DataLoader worker stalls on one batch",
    "uneven": "runs out of batches at --fault-step (uneven inputs) and leaves its loop",
    "stall": "stops for --stall-s at --fault-step, in its own code",
    "deadlock": "takes a lock it already holds at --fault-step: stuck in its own code for ever",
    "skip": "stops training at --fault-step and finishes its script early (exit 0)",
    "exit0": "sys.exit(0) at --fault-step",
    "raise": "raises ValueError in its own code at --fault-step",
    "backward_raise": "a backward hook raises at --fault-step",
    "exit": "os._exit(3) at --fault-step: no traceback, no error file",
    "segv": "a segmentation fault at --fault-step",
    "oom": "allocates 1 GiB beyond its memory cap at --fault-step",
    "abort": "os.abort() in its own code at --fault-step (a C assert, a double free)",
    "gil": "holds the GIL in one C call at --fault-step, for --stall-s",
    "gil_everywhere": "every rank computes in C calls of about 5 s holding the GIL, for two steps (healthy)",
    "exit_gil_hang": "hangs at exit holding the GIL (after destroy_process_group), once the others finished",
    "exec": "execs another program at --fault-step (its beacon is gone)",
    "exit_before_broadcast": "os._exit(3) where every rank calls its first broadcast, at --fault-step",
    "kill_before_broadcast": "SIGKILLs itself (as the OOM killer would) where every rank calls its first broadcast",
    "abort_before_broadcast": "os.abort() in its own code where every rank calls its first broadcast",
    "exit_then_raise": "os._exit(5) after a barrier at --fault-step; the next rank raises 50 ms later",
    "grandchild_term": "starts a child that ignores SIGTERM, then raises at --fault-step",
    "grandchild_session": "starts a child in a session of its own (setsid), then raises at --fault-step",
    "helper": "starts a child in a session of its own that ignores SIGTERM, and goes on",
    "slow_compute": "from --fault-step on, computes (--slow-factor - 1) times its step more on every step (matrix "
                    "multiplies on its device): a straggler",
    "slow_loader": "from --fault-step on, its data loader sleeps (--slow-factor - 1) times its step before every "
                   "batch: a straggler",
    "slow_device": "from --fault-step on, its device computes (--slow-factor - 1) times its step more on every step, "
                   "queued without waiting for it (the host runs ahead: only device times show it); on the host, as "
                   "slow_compute",
}
SLOW_FAULTS = ("slow_compute", "slow_loader", "slow_device")
STEP_SAMPLES = 20  # the victim's last steps before --fault-step, whose median is "its step"
BROADCAST_FAULTS = ("exit_before_broadcast", "kill_before_broadcast", "abort_before_broadcast")
GIL_EVERYWHERE_STEPS = 2
GIL_EVERYWHERE_S = 5.0
SLOW_IMPORT = "ddplab.drills._import_fault"  # the module a fault hangs or stops inside (its import reads the fault)
IMPORT_FAULT_ENV = "DDPLAB_DRILL_IMPORT_FAULT"


def add_arguments(parser: argparse.ArgumentParser, faults=tuple(FAULTS)) -> None:
    """The options every training code takes; ``faults``: the ones it can inject (a code adds its own)."""
    parser.add_argument("--fault", choices=sorted(faults), default="none")
    parser.add_argument("--victim", type=int, default=1, help="the global rank that misbehaves")
    parser.add_argument("--fault-step", type=int, default=5, help="the step at which the victim misbehaves")
    parser.add_argument("--late-s", type=float, default=60.0)
    parser.add_argument("--stall-s", type=float, default=120.0)
    parser.add_argument("--ignore-sigterm", action="store_true", help="every rank ignores SIGTERM")
    parser.add_argument("--slow-factor", type=float, default=1.5,
                        help="slow_compute, slow_loader: the victim's step becomes this many times its step")


def framework_job(prog: str, doc: str, argv: list[str] | None) -> tuple[argparse.Namespace, "Faults"]:
    """A framework training code's parsed options and its faults, those due at start already injected."""
    parser = argparse.ArgumentParser(prog=prog, description=doc.splitlines()[0])
    add_arguments(parser)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args(argv)
    faults = Faults(args)
    faults.at_start()
    return args, faults


def announce(rank: int, what: str) -> None:
    """The injection, on stdout and in the rank's beacon where ddplab started the rank."""
    at = time.time()
    with contextlib.suppress(ImportError):
        from ddplab.supervision.beacon import current

        beacon = current()
        if beacon is not None:  # a drill reads it there, on every machine of the job
            beacon.note(injected=what, injected_at=at)
    print(f"[rank {rank}] injecting fault: {what} at {at:.3f}", flush=True)


def hold_the_gil(seconds: float) -> None:
    """One C call that keeps the GIL and waits (a C library that forgot to release it, stuck on a lock): no other
    thread of the process runs, the beacon's heartbeat included, and the process uses no CPU."""
    ctypes.PyDLL(None).sleep(int(seconds))


def compute_holding_the_gil(seconds: float) -> None:
    """One C call that keeps the GIL and computes for about ``seconds`` on an idle core (a tokenizer or a C
    extension that forgot to release it): sum() over a range runs in C from start to end."""
    started, n = time.perf_counter(), 1 << 22
    sum(range(n))
    rate = n / max(time.perf_counter() - started, 1e-6)
    sum(range(int(rate * seconds)))


class Faults:
    """One rank's side of a fault: the victim injects it at the hooks the training code calls."""

    def __init__(self, args: argparse.Namespace):
        self.fault, self.fault_step = args.fault, args.fault_step
        self.late_s, self.stall_s = args.late_s, args.stall_s
        self.ignore_sigterm = args.ignore_sigterm
        self.rank = int(os.environ.get("RANK", "0"))
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.victim = args.victim
        self.is_victim = self.rank == args.victim
        self.slow_factor = args.slow_factor
        self._step_started: float | None = None
        self._steps_s: list[float] = []
        self._extra_s = 0.0  # what a slow fault adds to each step, once measured

    def mine(self, fault: str) -> bool:
        return self.is_victim and self.fault == fault

    # ------------------------------------------------------------------------------------------ before training

    def at_start(self) -> None:
        """First thing in the rank, before torch is imported."""
        if self.ignore_sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if self.mine("syntax"):
            announce(self.rank, FAULTS["syntax"])
            compile("def broken(:\n    pass\n", "plugin.py", "exec")
        if self.mine("hang_in_import") or self.mine("stop_in_import"):
            announce(self.rank, FAULTS[self.fault])
            os.environ[IMPORT_FAULT_ENV] = self.fault
            __import__(SLOW_IMPORT)

    def before_init(self) -> None:
        if self.mine("late"):
            announce(self.rank, f"sleeping {self.late_s} s before init_process_group")
            time.sleep(self.late_s)

    def model_width(self, width: int) -> int:
        """The model's width on this rank: another one on the victim of a parameter mismatch."""
        if self.mine("param_mismatch"):
            announce(self.rank, f"builds its model {width + 8} wide where the others build it {width} wide")
            return width + 8
        return width

    def loader(self, steps: int, batch_size: int, features: int, per_step: int = 1):
        """This rank's DataLoader: ``per_step`` batches a step of random samples seeded by rank, fewer on the victim
        of uneven inputs, stalling as the fault says; one worker where a worker is to stall (a process of the rank's
        own), none otherwise."""
        from torch.utils.data import DataLoader

        batches = (self.fault_step if self.mine("uneven") else steps) * per_step
        data = _Samples(batches * batch_size, features, self.rank,
                        stall_at=self.fault_step * batch_size if self.mine("loader_stall") else None,
                        stall_s=self.stall_s,
                        pause_every=batch_size if self.mine("slow_loader") else None, pause_s=lambda: self._extra_s)
        return DataLoader(data, batch_size=batch_size, num_workers=1 if self.fault == "loader_stall" else 0)

    def at_exit(self) -> None:
        """The training code is done: the victim of a hang at exit stays, holding the GIL (a deadlocked destructor)."""
        if self.mine("exit_gil_hang"):
            announce(self.rank, f"hangs at exit holding the GIL for {self.stall_s} s")
            hold_the_gil(self.stall_s)

    def data_ended(self, step: int) -> None:
        """The rank's data ran out after ``step`` steps: the injection of uneven inputs, on the victim."""
        if self.mine("uneven"):
            announce(self.rank, f"its data ended after {step} steps (uneven inputs); it leaves its training loop")

    def watch_backward(self, model) -> None:
        """A backward hook on the model's first layer with parameters (a gradient check) that raises at --fault-step
        on the victim. A module hook: FSDP2 computes gradients on parameters other than the ones it shows."""
        if not self.mine("backward_raise"):
            return
        self._backward_step = -1
        layer = next(m for m in model.modules() if next(m.parameters(recurse=False), None) is not None)

        def hook(module, grad_input, grad_output):
            if self._backward_step == self.fault_step:
                announce(self.rank, "a backward hook raising ValueError")
                raise ValueError(f"gradient check found a NaN on rank {self.rank} at step {self.fault_step}")

        layer.register_full_backward_hook(hook)

    # ------------------------------------------------------------------------------------------ during training

    def at_step(self, step: int, device=None, cap: int | None = None) -> str | None:
        """At the top of every training step; "stop" where the victim leaves its training loop."""
        self._backward_step = step
        if self.fault in SLOW_FAULTS and self.is_victim:
            self._slow_down(step, device)
            return None
        if self.fault == "gil_everywhere" and self.fault_step <= step < self.fault_step + GIL_EVERYWHERE_STEPS:
            if step == self.fault_step:
                announce(self.rank, f"computes in a C call of about {GIL_EVERYWHERE_S:.0f} s holding the GIL, "
                                    f"for {GIL_EVERYWHERE_STEPS} steps")
            compute_holding_the_gil(GIL_EVERYWHERE_S)
            return None
        if self.fault in BROADCAST_FAULTS and step == self.fault_step:
            self._first_broadcast(device)
            return None
        if self.fault == "exit_then_raise" and step == self.fault_step:
            self._exit_then_raise(device)
            return None
        if not self.is_victim or step != self.fault_step:
            return None
        return self._inject(device, cap)

    def _inject(self, device, cap: int | None) -> str | None:
        fault, rank = self.fault, self.rank
        if fault == "skip":
            announce(rank, f"stops training at step {self.fault_step} and finishes early")
            return "stop"
        if fault == "exit0":
            announce(rank, "sys.exit(0)")
            sys.exit(0)
        if fault == "raise":
            announce(rank, "raising ValueError")
            raise ValueError(f"corrupt sample in shard {rank} at step {self.fault_step}")
        if fault == "exit":
            announce(rank, "os._exit(3)")
            os._exit(3)
        if fault == "segv":
            announce(rank, "a segmentation fault")
            ctypes.string_at(0)
        if fault == "abort":
            announce(rank, "os.abort()")
            os.abort()
        if fault == "stall":
            announce(rank, f"stopped for {self.stall_s} s in its own code")
            time.sleep(self.stall_s)
        elif fault == "deadlock":
            announce(rank, "took a lock it already holds")
            lock = threading.Lock()
            lock.acquire()
            lock.acquire()
        elif fault == "gil":
            announce(rank, f"holds the GIL in one C call for {self.stall_s} s")
            hold_the_gil(self.stall_s)
        elif fault == "exec":
            announce(rank, "execs another program")
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)"])
        elif fault == "oom":
            _out_of_memory(rank, device, cap)
        elif fault in ("grandchild_term", "grandchild_session", "helper"):
            self._start_helper()
        return None

    def _slow_down(self, step: int, device) -> None:
        """Measure the victim's step (median of STEP_SAMPLES), then from --fault-step make it slow_factor as long."""
        now = time.perf_counter()
        if self._step_started is not None and step <= self.fault_step:
            self._steps_s = (self._steps_s + [now - self._step_started])[-STEP_SAMPLES:]
        self._step_started = now
        if step < self.fault_step:
            return
        if step == self.fault_step:
            ordered = sorted(self._steps_s) or [0.0]
            self._extra_s = (self.slow_factor - 1) * ordered[len(ordered) // 2]
            how = "its data loader sleeps" if self.fault == "slow_loader" else "computes"
            announce(self.rank, f"{how} {1000 * self._extra_s:.1f} ms more every step ({self.slow_factor:g} times "
                                f"its step of {1000 * ordered[len(ordered) // 2]:.1f} ms)")
        if self.fault == "slow_compute":
            _compute_for(self._extra_s, device)
        elif self.fault == "slow_device":
            self._queue_device_work(device)

    def _queue_device_work(self, device) -> None:
        """Matrix multiplies worth the extra time (timed once), queued on the device without waiting for them."""
        if device is None or device.type == "cpu":
            _compute_for(self._extra_s, device)
            return
        import torch

        if getattr(self, "_matmuls", None) is None:
            a = torch.randn(1024, 1024, device=device)
            synchronize_device(device)
            started, count = time.perf_counter(), 20
            for _ in range(count):
                a = torch.tanh(a @ a)
            synchronize_device(device)
            each = (time.perf_counter() - started) / count
            self._matmuls = (a, max(1, round(self._extra_s / each)))
        a, count = self._matmuls
        for _ in range(count):
            a = torch.tanh(a @ a)

    def _first_broadcast(self, device) -> None:
        """Every rank calls its first broadcast (a value rank 0 decides, as a learning-rate schedule); the victim
        dies just before it, without a record."""
        import torch
        import torch.distributed as dist

        if self.is_victim:
            if self.fault == "exit_before_broadcast":
                announce(self.rank, "os._exit(3) before the first broadcast")
                os._exit(3)
            if self.fault == "abort_before_broadcast":
                announce(self.rank, "os.abort() before the first broadcast")
                os.abort()
            announce(self.rank, "SIGKILL of itself before the first broadcast")
            os.kill(os.getpid(), signal.SIGKILL)
        dist.broadcast(torch.zeros(1, device=device), src=0)

    def _exit_then_raise(self, device) -> None:
        import torch.distributed as dist

        dist.barrier()
        if self.is_victim:
            announce(self.rank, "os._exit(5) after a barrier")
            os._exit(5)
        if self.rank == (self.victim + 1) % self.world_size:
            time.sleep(0.05)
            raise RuntimeError(f"rank {self.rank} found its checkpoint directory gone")

    def _start_helper(self) -> None:
        fault = self.fault
        own_session, ignores_term = fault != "grandchild_term", fault != "grandchild_session"
        helper = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
                  if ignores_term else "import time; time.sleep(600)")
        child = subprocess.Popen([sys.executable, "-c", helper], start_new_session=own_session)
        how = ", ".join(w for w, yes in (("its own session", own_session), ("ignores SIGTERM", ignores_term)) if yes)
        if fault == "helper":
            announce(self.rank, f"started pid {child.pid} ({how}) and goes on")
            return
        announce(self.rank, f"started pid {child.pid} ({how}), then raising")
        raise RuntimeError(f"rank {self.rank} failed after starting helper pid {child.pid}")


class _Samples:
    """A map-style dataset of random samples, built lazily (torch is imported by the time a DataLoader asks)."""

    def __init__(self, length: int, features: int, seed: int, stall_at: int | None, stall_s: float,
                 pause_every: int | None, pause_s):
        self.length, self.features, self.seed = length, features, seed
        self.stall_at, self.stall_s = stall_at, stall_s
        self.pause_every, self.pause_s = pause_every, pause_s  # a sleep before every batch (its first sample)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        import torch

        if index == self.stall_at:
            announce(self.seed, f"its DataLoader worker (pid {os.getpid()}) stalls for {self.stall_s} s")
            time.sleep(self.stall_s)
        if self.pause_every and index % self.pause_every == 0 and self.pause_s() > 0:
            time.sleep(self.pause_s())
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        return torch.randn(self.features, generator=g), torch.randint(0, 2, (), generator=g)


def _compute_for(seconds: float, device) -> None:
    """Matrix multiplies on ``device`` until ``seconds`` have passed (the device synchronised after each)."""
    import torch

    a = torch.randn(256, 256, device=device)
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        a = torch.tanh(a @ a)
        synchronize_device(device)


def _out_of_memory(rank: int, device, cap: int | None) -> None:
    import torch

    if device is not None and device.type != "cpu":
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
