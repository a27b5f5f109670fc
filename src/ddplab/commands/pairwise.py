"""`ddplab pairwise`: every pair of machines of a job, one rank on each, to find a slow or broken one
(measurements/pairwise.py says how). Run it on every machine, as the other commands across machines:

    ddplab pairwise --nnodes 3 --rdzv-endpoint node0:29400        (on each of the three machines)
"""

from __future__ import annotations

import argparse

from .. import display
from ..config import PAIRWISE_DEFAULT_REPEAT, PairwiseConfig
from ..measurements import pairwise
from ..records import Report
from ..records.pairwise import PairwiseRecord
from ..sizes import size_range
from . import machines_view, options

SUMMARY = pairwise.SUMMARY


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_launch_arguments(parser, nproc_default=1)
    parser.add_argument("-b", "--minbytes", default="8", help="smallest size: each pair's latency (default: 8)")
    parser.add_argument("-e", "--maxbytes", default="64M", help="largest size: each pair's busbw (default: 64M)")
    parser.add_argument("-f", "--stepfactor", type=float, default=2.0, help="size multiplier (default: 2)")
    parser.add_argument("-n", "--iters", type=int, default=20, help="timed iterations per size (default: 20)")
    parser.add_argument("-w", "--warmup", type=int, default=5, help="untimed iterations per size (default: 5)")
    parser.add_argument("-R", "--repeat", type=int, default=PAIRWISE_DEFAULT_REPEAT,
                        help="times each size is measured; the median is kept (default: %(default)s)")


def config_from_args(args) -> PairwiseConfig:
    return PairwiseConfig(launch=options.launch_options(args),
                          sizes=tuple(size_range(args.minbytes, args.maxbytes, args.stepfactor)),
                          iters=args.iters, warmup=args.warmup, repeat=args.repeat)


validate = config_from_args


def render(report: Report, console) -> None:
    r: PairwiseRecord = report.results
    display.failures(r.session, console)
    if r.machines is not None:
        console.print(machines_view.ranks_table(r.machines))
    if r.pairs:
        console.print(machines_view.pairs_table(r.pairs, r.finding))
    if r.finding is not None:
        console.print(f"rule: {r.finding.rule}", markup=False, highlight=False)
    display.footer(console, r.session, report.verdict, pairwise.summary(r))


def main(args, console) -> int:
    return options.run_measurement(pairwise, config_from_args(args), render, args, console)
