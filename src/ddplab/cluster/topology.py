"""Which ranks share a machine, and the groups of ranks that tell machines apart: pure helpers for reports.

A report across machines separates what stays inside a machine from what crosses the network. Everything here
works from one mapping, global rank -> machine (``{rank: view.host}``); a rank with no known machine belongs to
none. ``comparison_groups`` and ``pair_groups`` are the groups a measurement is repeated on to tell the two apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..records.machines import INTER, INTRA, PAIR, WHOLE_JOB, Group


def machines(hosts: Mapping[int, str | None]) -> dict[str, list[int]]:
    """Machine -> its ranks, ascending; machines in the order of their lowest rank (node order)."""
    by_machine: dict[str, list[int]] = {}
    for rank in sorted(hosts):
        if hosts[rank] is not None:
            by_machine.setdefault(hosts[rank], []).append(rank)
    return by_machine


@dataclass(frozen=True)
class MachinePair:
    """One test between two machines, run by one rank on each (its lowest)."""

    machine_a: str
    machine_b: str
    rank_a: int
    rank_b: int


def pairwise_plan(hosts: Mapping[int, str | None]) -> list[list[MachinePair]]:
    """The machine-pair tests that find a slow or broken machine: every pair once, in rounds of disjoint pairs
    (the circle method of a round-robin tournament), so the pairs of one round can run at the same time. A
    machine's representative is its lowest rank; with M odd, one machine rests each round."""
    by_machine = machines(hosts)
    names: list[str | None] = list(by_machine)
    if len(names) < 2:
        return []
    if len(names) % 2:
        names.append(None)  # the machine paired with None rests this round
    rounds = []
    for _ in range(len(names) - 1):
        half = len(names) // 2
        pairs = [(names[i], names[-1 - i]) for i in range(half)]
        rounds.append([MachinePair(a, b, by_machine[a][0], by_machine[b][0]) for a, b in
                       (sorted(p, key=lambda m: by_machine[m][0]) for p in pairs if None not in p)])
        names = [names[0], names[-1], *names[1:-1]]  # keep the first, rotate the rest
    return rounds


def comparison_groups(hosts: Mapping[int, str | None]) -> list[Group]:
    """The whole job, each machine with two ranks or more, and one rank per machine (each machine's lowest, left
    out where it is the whole job), in that order; nothing when the job is on one machine."""
    by_machine = machines(hosts)
    if len(by_machine) < 2:
        return []
    every = sorted(r for ranks in by_machine.values() for r in ranks)
    groups = [Group(WHOLE_JOB, list(by_machine), every)]
    groups += [Group(INTRA, [m], ranks) for m, ranks in by_machine.items() if len(ranks) >= 2]
    lowest = [ranks[0] for ranks in by_machine.values()]
    if len(lowest) < len(every):
        groups.append(Group(INTER, list(by_machine), lowest))
    return groups


def pair_groups(hosts: Mapping[int, str | None]) -> list[list[Group]]:
    """``pairwise_plan`` as groups of two ranks, round by round."""
    return [[Group(PAIR, [p.machine_a, p.machine_b], [p.rank_a, p.rank_b]) for p in round_]
            for round_ in pairwise_plan(hosts)]
