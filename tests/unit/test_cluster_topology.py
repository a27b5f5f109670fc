"""Ranks to machines, and the order of machine-pair tests."""

from itertools import combinations

import pytest

from ddplab.cluster.topology import MachinePair, machines, pairwise_plan

# 2 machines x 2 ranks, as the netns tests run them; machines named by address
TWO_BY_TWO = {0: "10.9.0.1", 1: "10.9.0.1", 2: "10.9.0.2", 3: "10.9.0.2"}


def test_machines_are_listed_in_node_order_with_their_ranks():
    hosts = {5: "b", 0: "a", 4: "b", 1: "a", 2: "c", 3: "c"}
    assert machines(hosts) == {"a": [0, 1], "c": [2, 3], "b": [4, 5]}


def test_one_machine_has_no_pairs_to_test():
    assert pairwise_plan({0: "a", 1: "a"}) == []


def test_two_machines_are_one_round_of_one_pair_run_by_their_lowest_ranks():
    assert pairwise_plan(TWO_BY_TWO) == [[MachinePair("10.9.0.1", "10.9.0.2", 0, 2)]]


@pytest.mark.parametrize("count", [3, 4, 5, 8])
def test_every_machine_pair_is_tested_once_in_rounds_of_disjoint_pairs(count):
    hosts = {rank: f"m{rank // 2}" for rank in range(2 * count)}  # two ranks per machine
    rounds = pairwise_plan(hosts)
    assert len(rounds) == (count - 1 if count % 2 == 0 else count)
    tested = [frozenset((p.machine_a, p.machine_b)) for r in rounds for p in r]
    assert sorted(map(sorted, tested)) == sorted(map(sorted, map(frozenset, combinations(machines(hosts), 2))))
    for pairs in rounds:
        busy = [m for p in pairs for m in (p.machine_a, p.machine_b)]
        assert len(busy) == len(set(busy))  # no machine twice in one round
        assert len(pairs) == count // 2
        for p in pairs:
            assert (p.rank_a, p.rank_b) == (machines(hosts)[p.machine_a][0], machines(hosts)[p.machine_b][0])
            assert p.rank_a < p.rank_b
