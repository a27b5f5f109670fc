"""Machine pairs: find the slow or broken machine of a job across machines.

Every pair of machines is tested once, one rank on each, in rounds of disjoint pairs (cluster/topology.pairwise_plan).
Each pair runs all_reduce at every size as the sweep does: its smallest size gives its latency, its largest its
busbw. The finding (aggregate.judge_pairs) names the slow and broken pairs and the machine every flagged pair shares.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import aggregate
from .checks import did_not_complete, finding_verdict, rule_text, setup_warnings
from ..basics.cli_options import Range, argv_of, check_fields, nested, option, spelt
from ..records.config import LaunchOptions
from ..basics.sizes import SizeRange
from ..basics.validators import require
from ..job.policy import require_fits
from ..records import Check, Verdict
from ..records.pairwise import PairwiseRankResult, PairwiseRecord
from ..records.session import SessionRecord
from ..records.sweep import SweepSettings
from ..basics.observer import QUIET, Observer
from .sweep import BUFFERS_PER_SIZE, DEFAULT_SIZES, MAX_REPEAT, iters_option, merge_row, warmup_option

NAME = "pairwise"
SUMMARY = "machine pairs: all_reduce latency and busbw between every two machines, the slowest pair flagged"
DEFAULT_REPEAT = 3  # pairs are compared with each other: the median of three, as on an accelerator


@dataclass(frozen=True, kw_only=True)
class PairwiseConfig:
    """Every pair of machines, one rank on each: all_reduce at each size, the slowest pair flagged. Runs on every
    machine of the job; more ranks than one per machine wait while their machine's lowest one tests."""

    launch: LaunchOptions = nested(lambda: LaunchOptions(nproc=1), json={"flatten": True})
    sizes: tuple[int, ...] = spelt(SizeRange(), default=DEFAULT_SIZES)
    """The all_reduce sizes in bytes, as -b/-e/-f make them (the sweep's): the smallest gives each pair's
    latency, the largest its busbw."""
    iters: int = iters_option()
    """Timed iterations per size."""
    warmup: int = warmup_option()
    """Untimed iterations per size."""
    repeat: int = option("-R", "--repeat", default=DEFAULT_REPEAT, range=Range(1, MAX_REPEAT,
                                                                              reference="invalid-repeat"))
    """Times each size is measured; the median is kept."""

    def __post_init__(self):
        require(self.launch.nnodes >= 2, "pairwise-needs-machines",
                f"--nnodes {self.launch.nnodes}: pairwise tests pairs of machines; run it on every machine with "
                f"--nnodes N (2 or more) and the same --rdzv-endpoint HOST:PORT")
        check_fields(self)

    to_argv = argv_of  # the command line that gives this config back


Config, Record = PairwiseConfig, PairwiseRecord

DTYPE = "float"
METHOD = ("every pair of machines once, one rank on each (its lowest), in rounds of disjoint pairs run at the same "
          "time while the other ranks wait; per pair all_reduce at each size: warmup, the median of -R "
          "repetitions of -n iterations (pipelined), exact data checked; latency = time at the smallest size, "
          "busbw at the largest")


def run(config: PairwiseConfig, observer: Observer = QUIET) -> PairwiseRecord:
    from ..job.session import prepare, run_workload, Workload

    prepared = prepare(config.launch, with_memory=True)
    largest = max(config.sizes)
    require_fits(*prepared, BUFFERS_PER_SIZE * largest, f"-e {largest} B ({BUFFERS_PER_SIZE} buffers per rank)",
                 "pairwise-too-large", hint="lower -e/--maxbytes")
    settings = SweepSettings(ops=("all_reduce",), sizes=config.sizes, dtype=DTYPE, mode="pipelined",
                             iters=config.iters, warmup=config.warmup, check=True, repeat=config.repeat)
    session = run_workload(Workload("pairwise", settings), config.launch, NAME, observer, prepared=prepared)
    return record_of(session.record, session.results)


def record_of(session: SessionRecord, results: list[PairwiseRankResult]) -> PairwiseRecord:
    """Every pair from what the ranks gathered; nothing when they did not finish."""
    job = aggregate.gathered(results)
    if job is None:
        return PairwiseRecord(session=session, method=METHOD, rows=[], pairs=[])
    rows, pairs = aggregate.pair_results(job, lambda same, n: merge_row(same, n, DTYPE))
    return PairwiseRecord(session=session, method=METHOD, rows=rows, pairs=pairs,
                          machines=aggregate.job_machines(job), finding=aggregate.judge_pairs(pairs))


def checks(record: PairwiseRecord) -> list[Check]:
    incomplete = did_not_complete(record.session, NAME)
    if incomplete:
        return incomplete
    rows = [aggregate.correct_on_every_group(record.rows)] if record.rows else []
    return [*rows, pairs_check(record), *setup_warnings(record.session)]


def pairs_check(record: PairwiseRecord) -> Check:
    """The finding as a check row: FAIL for a broken pair, WARN for a slow one (informational on the host)."""
    f = record.finding
    host_only = record.session.host_only
    threshold = rule_text(aggregate.PAIR_RULE, host_only)
    if not record.pairs or f is None:
        machines = ", ".join(record.machines.machines) if record.machines else "unknown"
        return Check("slowest machine pair", Verdict.SKIP, f"no pair: every rank is on one machine ({machines})",
                     threshold, "pairs need two machines or more", "run one launcher on each machine, each with its "
                                                                    "own address toward the endpoint")
    verdict = Verdict.FAIL if f.broken else finding_verdict(bool(f.slow), host_only)
    return Check("slowest machine pair", verdict, finding_text(record), threshold,
                 f"{len(record.pairs)} pair(s) of {len(record.machines.machines) if record.machines else '?'} "
                 f"machines, one rank on each",
                 "none" if not f.flagged else f"test {', '.join(f.suspects) or 'the flagged pairs'} alone: its link, "
                                              f"its interface (the pinned socket interface), what else runs there")


def finding_text(record: PairwiseRecord) -> str:
    f = record.finding
    by_label = {p.label: p for p in record.pairs}
    parts = []
    if f.slowest is not None:
        p = by_label[f.slowest]
        parts.append(f"slowest {p.label}: {p.busbw_gbps:.3g} GB/s at {p.busbw_size_bytes} B, "
                     f"{p.latency_us:.1f} us at {p.latency_size_bytes} B")
    if f.slow:
        parts.append(f"slow: {', '.join(f.slow)}")
    if f.broken:
        parts.append("broken: " + ", ".join(f"{label} ({by_label[label].why_broken})" for label in f.broken))
    if f.suspects:
        parts.append(f"suspect machine(s): {', '.join(f.suspects)}")
    if f.note:
        parts.append(f.note)
    return "; ".join(parts)


def summary(record: PairwiseRecord) -> str:
    session = record.session
    if not session.completed:
        return f"{session.backend}: {session.failure_reason()}"
    if not record.pairs or record.finding is None:
        return f"{session.backend}: no machine pair (one machine)"
    return f"{session.backend}: {len(record.pairs)} pair(s); {finding_text(record)}"
