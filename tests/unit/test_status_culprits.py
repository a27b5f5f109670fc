"""Culprits by GLOBAL rank from status files, on any machine of a job, and after the ranks are gone
(issue 11: the second machine's supervisor once named "rank 0 never started")."""

from ddplab.status import name_culprits, name_culprits_after_exit
from ddplab.records.session import RankState

NOW = 1000.0


def _state(rank, local_rank, phase, seq=0, done=0, heartbeat=NOW, **kw):
    return RankState(rank=rank, local_rank=local_rank, pid=100 + rank, phase=phase, seq=seq, done=done,
                     heartbeat=heartbeat, **kw)


def test_the_second_machine_names_its_own_global_rank():
    # nnodes 2 x nproc 1: this machine holds global rank 1 only, which stopped issuing collectives
    culprits, why = name_culprits({1: _state(1, 0, "stalled", seq=9, done=9)}, local_count=1, now=NOW, stale_s=2)
    assert culprits == [1]
    assert "never started" not in why and "outside any collective" in why


def test_a_missing_local_rank_is_named_by_its_global_number():
    # nnodes 2 x nproc 2, second machine: global ranks 2 and 3; only 3 wrote a status
    culprits, why = name_culprits({3: _state(3, 1, "in-collective", seq=4)}, local_count=2, now=NOW, stale_s=2)
    assert culprits == [2] and why == "never started (no status written)"


def test_a_machine_whose_ranks_all_sleep_before_init_names_them():
    culprits, why = name_culprits({1: _state(1, 0, "before-init")}, local_count=1, now=NOW, stale_s=2)
    assert culprits == [1] and why == "never reached init_process_group"


def test_ranks_stuck_in_init_together_are_still_the_library_or_the_link():
    states = {0: _state(0, 0, "in-init"), 1: _state(1, 1, "in-init")}
    culprits, why = name_culprits(states, local_count=2, now=NOW, stale_s=2)
    assert culprits == [0, 1] and "same collective" in why


def test_after_exit_old_heartbeats_are_no_evidence_and_a_failed_waiter_was_waiting():
    # what a drill reads once its ranks are gone: rank 0 raised inside the all_reduce it waited in, rank 1
    # stalled without entering it; both stopped beating long ago
    states = {0: _state(0, 0, "failed", seq=6, done=5, heartbeat=1.0, error="timed out"),
              1: _state(1, 1, "stalled", seq=5, done=5, heartbeat=1.0)}
    assert name_culprits_after_exit(states, local_count=2) == ([1], "entered 5 collectives while others entered 6")
    # read as a live snapshot, the stopped heartbeats would blame both
    assert name_culprits(states, local_count=2, now=NOW, stale_s=2)[0] == [0, 1]


def test_after_exit_a_failed_rank_counts_as_inside_its_collective():
    states = {0: _state(0, 0, "failed", seq=5, done=4, op="all_reduce", numel=8),
              1: _state(1, 1, "running", seq=5, done=5)}
    assert name_culprits_after_exit(states, local_count=2) == ([1], "not inside the collective the others are "
                                                                   "waiting in")
