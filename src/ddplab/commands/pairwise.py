"""`ddplab pairwise`: every pair of machines of a job, one rank on each, to find a slow or broken one
(measurements/pairwise.py says how). Run it on every machine, as the other commands across machines:

    ddplab pairwise --nnodes 3 --rdzv-endpoint node0:29400        (on each of the three machines)
"""

from __future__ import annotations

import argparse

from .. import display
from ..measurements import pairwise
from ..records import Report
from ..records.pairwise import PairwiseRecord
from . import machines_view, options

SUMMARY = pairwise.SUMMARY


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_config_arguments(parser, pairwise.Config)


def config_from_args(args) -> pairwise.PairwiseConfig:
    return options.config_from_args(pairwise.Config, args)


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
