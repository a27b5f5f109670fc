"""The report's DDP experiment, run for real through elastic, with proof that gradients were synchronised.

N ranks on one device (each with an allocator cap) or one per device. Each rank proves synchronisation against a
single-process reference (workloads/ddp_train.py); here the proofs are combined: parameters bit-identical on every
rank, every gradient equal to the reference, and the negative control. Step time p50/p99 over all ranks' steps.
"""

from __future__ import annotations

from . import aggregate
from .checks import run_checks
from ..job.policy import require_fits
from ..records import Check, Verdict
from ..records.session import Distribution, SessionRecord
from ..records.train import TrainConfig, TrainRankResult, TrainRecord, TrainSettings
from ..basics.observer import QUIET, Observer
from ..workloads.ddp_train import TIMING_METHOD

NAME = "train"
SUMMARY = "run DDP with N ranks (shared device or one per device) and prove gradients were synchronised"


Config, Record = TrainConfig, TrainRecord

# (input features, activation values kept per sample) of each model in workloads/ddp_train.py
MODEL_SHAPES = {"linear": (10, 2 * 10), "mlp": (1024, 7 * 1024)}


def run(config: TrainConfig, observer: Observer = QUIET) -> TrainRecord:
    from ..job.session import prepare, run_workload, Workload

    prepared = prepare(config.launch, with_memory=True)
    require_fits(*prepared, memory_per_rank(config), f"--batch-size {config.batch_size} with --model {config.model}",
                 "batch-too-large", hint="lower --batch-size")
    settings = TrainSettings(steps=config.steps, model=config.model, batch_size=config.batch_size, seed=config.seed,
                             check_every=config.check_every)
    session = run_workload(Workload("ddp_train", settings), config.launch, "train", observer, prepared=prepared)
    return record_of(session.record, session.results)


def memory_per_rank(config: TrainConfig) -> int:
    """A floor on the bytes one rank holds (workloads/ddp_train.py): every rank rebuilds all
    ranks' batches on the host, copies them to its device and concatenates them for the
    reference gradient, whose forward pass keeps each layer's output for the backward."""
    world = config.launch.nproc * config.launch.nnodes
    features, activations = MODEL_SHAPES[config.model]
    return world * config.batch_size * 4 * (3 * features + activations)


def record_of(session: SessionRecord, results: list[TrainRankResult]) -> TrainRecord:
    """Combine the ranks' proofs; nothing is proven (None) when the run did not complete."""
    completed, job = session.completed, aggregate.gathered(results)
    return TrainRecord(
        session=session,
        # every rank's digest as gathered by each rank: covers ranks on other machines too
        params_identical=len({d for r in results for d in r.all_params_sha256}) == 1 if completed else None,
        grad_matches_reference=all(r.grad_matches_reference for r in results) if completed else None,
        local_grad_differs=(all(r.local_grad_differs for r in results)
                            if completed and session.world_size > 1 else None),
        step_time_us=Distribution.of([t for r in results for t in r.step_times_us]),
        step_time_method=TIMING_METHOD,
        machines=None if job is None else aggregate.job_machines(job),  # None: one launcher, its ranks are listed
    )


def checks(record: TrainRecord) -> list[Check]:
    return run_checks(record.session, NAME, lambda: [synchronised(record), negative_control(record),
                                                      step_time(record)])


def synchronised(record: TrainRecord) -> Check:
    ok = bool(record.grad_matches_reference and record.params_identical)
    return Check("gradients synchronised", Verdict.PASS if ok else Verdict.FAIL,
                 f"params identical={record.params_identical}, grad = reference={record.grad_matches_reference}",
                 "both true", f"{record.session.world_size} ranks on {record.session.backend} train as one model",
                 "none" if ok else "the backend corrupts or skips gradient all_reduce: report it with this JSON")


def negative_control(record: TrainRecord) -> Check:
    """The proof above means something only if an unsynchronised gradient would have failed it."""
    differs = record.local_grad_differs
    if differs is None:
        return Check("negative control", Verdict.SKIP, "n/a (one rank)", "true",
                     "with one rank there is no unsynchronised gradient to tell apart", "none")
    return Check("negative control", Verdict.PASS if differs else Verdict.FAIL, f"local gradient differs={differs}",
                 "true", "each rank's own unsynchronised gradient differs from the reference, so the gradient "
                         "check can tell synchronised from unsynchronised",
                 "none" if differs else "the batches are too alike to prove anything: raise --batch-size or change "
                                        "--seed")


def step_time(record: TrainRecord) -> Check:
    st = record.step_time_us
    if not st.n:
        return Check("step time", Verdict.SKIP, "n/a (no step was timed)", "informational", record.step_time_method,
                     "none")
    return Check("step time", Verdict.INFO, f"p50 {st.p50:.0f} us, p99 {st.p99:.0f} us", "informational",
                 record.step_time_method, "compare with last week's report (`ddplab compare`)")


def summary(record: TrainRecord) -> str:
    session = record.session
    if not session.completed:
        return f"{session.backend}: {session.failure_reason()}"
    st = record.step_time_us
    return (f"{session.backend}, {session.world_size} ranks, "
            f"{'shared device' if session.shared_device else 'one per device'}: params identical="
            f"{record.params_identical}, grad matches reference={record.grad_matches_reference}, "
            f"step p50 {st.p50:.0f} us / p99 {st.p99:.0f} us")
