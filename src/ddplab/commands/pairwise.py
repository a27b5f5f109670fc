"""Find a slow or broken machine in a job: every pair of machines runs all_reduce, one rank on each,
in rounds of disjoint pairs; each pair's latency and bus bandwidth are compared with the others', and the machine
every slow pair shares is named. Run it on every machine of the job, as the other commands across machines.
"""

from __future__ import annotations

from ..report import terminal
from ..measurements import pairwise
from ..records import Report
from ..records.pairwise import PairwiseRecord
from . import machines_view, options

SUMMARY = pairwise.SUMMARY
EXAMPLES = (  # shown by --help (commands.help_epilog)
    ("ddplab pairwise --nnodes 4 --rdzv-endpoint node0:29400", "the same command on each of four machines"),
    ("srun --nodes 4 --ntasks-per-node 1 ddplab pairwise",
     "under Slurm, which says the machines and the endpoint"),
)


def render(report: Report, console) -> None:
    r: PairwiseRecord = report.results
    terminal.failures(r.session, console)
    if r.machines is not None:
        console.print(machines_view.ranks_table(r.machines))
    if r.pairs:
        console.print(machines_view.pairs_table(r.pairs, r.finding))
    if r.finding is not None:
        console.print(f"rule: {r.finding.rule}", markup=False, highlight=False)
    terminal.footer(console, r.session, report.verdict, pairwise.summary(r))


add_arguments, config_from_args, validate, main = options.measurement_command(pairwise, render)
