"""The report's DDP experiment, with proof that gradients were synchronised.

Every rank trains the same model on its own batch, generated from (seed, step, rank), so every rank can rebuild
all ranks' batches without communicating and compute a single-process reference: the gradient over the
concatenated batch, which DDP's averaged gradient must equal. Two proofs:
  1. the averaged gradient matches that reference (within this device's own arithmetic noise: _check_step),
     while the rank's own local gradient does not (the negative control: a check that compares a gradient with
     itself would also pass);
  2. after training, parameters are bit-identical on all ranks (SHA-256 of the bytes).
Step time: a whole step, blocking, device synchronised before and after.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import hashlib
import statistics
import time
from dataclasses import dataclass

from ..records.train import TrainRankResult, TrainSettings
from .machines import gather_objects, job_places

TIMING_METHOD = ("blocking: zero_grad+forward+backward(all_reduce)+step, host perf_counter, "
                 "device synchronised before and after each step")
GRAD_RTOL = 1e-4  # float32 sums in a different order differ by ~1e-7 relative; 1e-4 leaves margin
LEARNING_RATE = 0.001  # the report's SGD learning rate


def build_model(name: str, width: int = 1024):
    """(model, input features): the seed's Linear(10, 10), or an MLP of four ``width`` x ``width`` layers (1024:
    4.2 M parameters, 16.8 MB of gradients per step)."""
    import torch.nn as nn

    if name == "linear":
        return nn.Linear(10, 10), 10
    return nn.Sequential(*(nn.ReLU() if i % 2 else nn.Linear(width, width) for i in range(7))), width


class Trainer:
    """The seed's training step, for the lab's train stage and for every drill (drills/script.py): the model under
    DDP (or FSDP2's fully_shard), SGD, and a step of zero_grad, forward, backward, optimizer step. The gradients
    are reduced inside backward(), from C++ (DDP's reducer, FSDP's hooks): no torch.distributed call of the
    rank's own is on its stack while it waits there."""

    def __init__(self, model, device, wrap: str = "ddp", device_ids: list[int] | None = None):
        import torch
        import torch.distributed as dist

        self.module = model.to(device)
        if wrap == "fsdp2":
            from torch.distributed.device_mesh import init_device_mesh

            from ..errors import EnvironmentUnsupported
            from ..platform import fsdp2_unsupported

            reason = fsdp2_unsupported(device.type)
            if reason:
                raise EnvironmentUnsupported("fsdp2-unsupported", reason)

            try:
                from torch.distributed.fsdp import fully_shard
            except ImportError:  # torch < 2.6 keeps it under _composable
                from torch.distributed._composable.fsdp import fully_shard
            mesh = init_device_mesh(device.type, (dist.get_world_size(),))
            for layer in self.module.modules():
                if isinstance(layer, torch.nn.Linear):
                    fully_shard(layer, mesh=mesh)
            self.wrapped = fully_shard(self.module, mesh=mesh)
        else:
            from torch.nn.parallel import DistributedDataParallel as DDP

            self.wrapped = DDP(self.module, device_ids=device_ids)
        self.wrap = wrap
        self.optimizer = torch.optim.SGD(self.wrapped.parameters(), lr=LEARNING_RATE)

    def backward(self, x, sync: bool = True):
        """Forward and backward of one (micro-)batch; ``sync=False`` accumulates without reducing (DDP's no_sync,
        FSDP's set_requires_gradient_sync)."""
        if self.wrap == "fsdp2":
            self.wrapped.set_requires_gradient_sync(sync)
            context = contextlib.nullcontext()
        else:
            context = contextlib.nullcontext() if sync else self.wrapped.no_sync()
        with context:
            loss = self.wrapped(x).mean()
            loss.backward()
        return loss

    def update(self) -> None:
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=False)

    def step(self, x):
        """One step of the seed's training: zero_grad, forward, backward, optimizer step; the loss."""
        self.optimizer.zero_grad(set_to_none=False)
        loss = self.backward(x)
        self.optimizer.step()
        return loss


def make_batch(seed: int, step: int, rank: int, batch_size: int, features: int):
    import torch

    g = torch.Generator().manual_seed(seed * 1_000_003 + step * 7_919 + rank)
    return torch.randn(batch_size, features, generator=g)


@dataclass(frozen=True)
class StepCheck:
    """One step's gradient against the single-process references, relative to the largest gradient."""

    step: int
    err_concat_rel: float  # vs the gradient over all ranks' batches concatenated (what DDP means)
    err_average_rel: float  # vs the mean of each rank's batch gradient (what DDP computes)
    noise_rel: float  # the two references apart: this device's own arithmetic
    local_gap_rel: float  # this rank's unsynchronised gradient vs the concat reference
    ok: bool


def run(ctx) -> TrainRankResult:
    import torch

    s: TrainSettings = ctx.settings
    device = ctx.device
    # Real float32 matmuls: with TF32 the reference comparison measures rounding (~1e-3), not sync.
    torch.set_float32_matmul_precision("highest")
    torch.manual_seed(s.seed)
    model, features = build_model(s.model)
    trainer = Trainer(model, device, device_ids=None if ctx.runtime.host_only else [ctx.runtime.index])
    model = trainer.module
    reference = copy.deepcopy(model)  # plain module: never synchronised
    ctx.runtime.reset_peak_memory()

    step_times_us: list[float] = []
    checks: list[StepCheck] = []
    gradient_numel = sum(p.numel() for p in model.parameters())  # what DDP all_reduces every step
    for step in range(s.steps):
        batches = [make_batch(s.seed, step, r, s.batch_size, features) for r in range(ctx.world_size)]
        x = batches[ctx.rank].to(device)
        check = step in (0, s.steps - 1) or step % s.check_every == 0
        if check:
            reference.load_state_dict(model.state_dict())  # parameters before this step's update

        # Each step is one collective for ddplab's supervisor (status.py): progress it can see, and a step
        # stuck in DDP's all_reduce is "in-collective". Written outside the timed window.
        ctx.status.enter_collective("ddp_step", gradient_numel)
        ctx.runtime.synchronize()
        t0 = time.perf_counter()
        loss = trainer.step(x)
        ctx.runtime.synchronize()
        step_times_us.append((time.perf_counter() - t0) * 1e6)
        ctx.status.leave_collective()

        if check:
            checks.append(_check_step(step, model, reference, [b.to(device) for b in batches], ctx.rank))

    ctx.runtime.synchronize()
    peak_bytes, peak_method = ctx.runtime.peak_memory_bytes()
    digest = _params_digest(model)
    all_digests = gather_objects(digest, device)  # so other machines' ranks are compared too
    worst = max(checks, key=lambda c: c.err_concat_rel)
    noise = max(c.noise_rel for c in checks)
    # Negative control: the unsynchronised gradient (first checked step) must differ from the reference.
    local_gap = checks[0].local_gap_rel if ctx.world_size > 1 else None
    return TrainRankResult(
        params_sha256=digest,
        all_params_sha256=all_digests,
        grad_matches_reference=all(c.ok for c in checks),
        grad_checks=len(checks),
        grad_worst_step=worst.step,
        grad_err_vs_concat_rel=worst.err_concat_rel,
        grad_err_vs_rank_average_rel=max(c.err_average_rel for c in checks),
        device_numeric_noise_rel=noise,
        grad_rtol=GRAD_RTOL,
        local_grad_rel_gap=local_gap,
        local_grad_differs=None if local_gap is None else local_gap > 10 * GRAD_RTOL + 4 * noise,
        final_loss=float(loss.detach().cpu()),
        step_times_us=[round(t, 2) for t in step_times_us],
        step_time_p50_us=statistics.median(step_times_us),
        peak_mem_bytes=peak_bytes,
        peak_mem_method=peak_method,
        num_params=sum(p.numel() for p in model.parameters()),
        float32_matmul_precision=torch.get_float32_matmul_precision(),
        machines=job_places(ctx),  # across machines: every rank and its machine, for every machine's report
    )


def _grads(module, batch) -> list:
    module.zero_grad(set_to_none=False)
    module(batch).mean().backward()
    return [p.grad.detach().clone() for p in module.parameters()]


def _max_diff(xs, ys) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(xs, ys))


def _check_step(step: int, synced, reference, batches, rank: int) -> StepCheck:
    """Compare DDP's gradient with two single-process references, relative to the largest gradient: concat (the
    gradient over all ranks' batches concatenated: what DDP means) and rank average (what DDP computes, same
    kernels, so it must agree to float32 rounding). The two differ only by this device's arithmetic (a batch of
    20 and of 20*n take different kernels): that ``noise`` is allowed on the concat check."""
    import torch

    got = [p.grad.detach() for p in synced.parameters()]
    concat = _grads(reference, torch.cat(batches))
    per_rank = [_grads(reference, b) for b in batches]
    average = [sum(gs) / len(per_rank) for gs in zip(*per_rank)]
    scale = max(float(g.abs().max()) for g in concat) or 1.0
    err_concat = _max_diff(got, concat) / scale
    err_average = _max_diff(got, average) / scale
    noise = _max_diff(average, concat) / scale
    return StepCheck(
        step=step,
        err_concat_rel=err_concat,
        err_average_rel=err_average,
        noise_rel=noise,
        local_gap_rel=_max_diff(per_rank[rank], concat) / scale,
        ok=err_average <= GRAD_RTOL and err_concat <= GRAD_RTOL + 2 * noise,
    )


def _params_digest(model) -> str:
    h = hashlib.sha256()
    for p in model.parameters():
        t = p.detach().cpu().contiguous()
        # The tensor's raw bytes, read in one copy (no numpy dependency).
        h.update(ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()))
    return h.hexdigest()
