"""Culprits by GLOBAL rank from status files, on any machine of a job, and after the ranks are gone
(issue 11: the second machine's supervisor once named "rank 0 never started")."""

import time
from dataclasses import replace

from ddplab.records.supervision import RankState
from ddplab.supervision import states as status
from ddplab.supervision.states import name_culprits, name_culprits_after_exit

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
    states = {0: _state(0, 0, "in-init", world_size=2), 1: _state(1, 1, "in-init", world_size=2)}
    culprits, why = name_culprits(states, local_count=2, now=NOW, stale_s=2)
    assert culprits == [0, 1] and "same collective" in why


def test_one_machine_of_a_larger_job_all_in_init_names_the_ranks_of_the_other_machines():
    """Node 1 of 2 (ranks 2, 3 of 4), both waiting in init_process_group: the ranks it waits for are elsewhere.
    Seen when node 0 was stopped just after the two met: node 1's ranks waited for its store until torch's timeout."""
    states = {r: _state(r, r - 2, "in-init", world_size=4) for r in (2, 3)}
    culprits, why = name_culprits(states, local_count=2, now=NOW, stale_s=2)
    assert culprits == [0, 1] and why == status.NOT_JOINED_FROM_ELSEWHERE
    assert status.kind_of(why) == "never-reached-init"


def test_one_machine_of_a_larger_job_with_a_rank_before_init_names_its_own_rank():
    states = {2: _state(2, 0, "in-init", world_size=4), 3: _state(3, 1, "before-init", world_size=4)}
    culprits, why = name_culprits(states, local_count=2, now=NOW, stale_s=2)
    assert culprits == [3] and why == "never reached init_process_group while the others waited in it"


def test_ranks_all_silent_at_once_are_not_all_frozen_culprits():
    """Every heartbeat stale at the declaration (a machine, or the watcher, stalled): the silence tells nobody apart,
    and the ranks' own places do: two wait in the collective, the third never came."""
    states = {0: _state(0, 0, "in-collective", seq=11, done=10, heartbeat=NOW - 5),
              1: _state(1, 1, "in-collective", seq=11, done=10, heartbeat=NOW - 5),
              2: _state(2, 2, "stalled", seq=10, done=10, heartbeat=NOW - 5)}
    culprits, why = name_culprits(states, local_count=3, now=NOW, stale_s=2)
    assert culprits == [2] and "heartbeat" not in why
    states[0] = replace(states[0], heartbeat=NOW)  # one still beats: the silent ones stand out
    assert name_culprits(states, local_count=3, now=NOW, stale_s=2)[0] == [1, 2]


def test_after_exit_old_heartbeats_are_no_evidence_and_a_failed_waiter_was_waiting():
    # what a drill reads once its ranks are gone: rank 0 raised inside the all_reduce it waited in, rank 1
    # stalled without entering it; both stopped beating long ago
    states = {0: _state(0, 0, "failed", seq=6, done=5, heartbeat=1.0, error="timed out"),
              1: _state(1, 1, "stalled", seq=5, done=5, heartbeat=1.0)}
    assert name_culprits_after_exit(states, local_count=2) == ([1], "entered 5 collectives while others entered 6")
    # read as a live snapshot, the stopped heartbeats would blame rank 1 (rank 0 ended: its beat is no evidence)
    assert name_culprits(states, local_count=2, now=NOW, stale_s=2)[0] == [1]


def test_after_exit_a_failed_rank_counts_as_inside_its_collective():
    states = {0: _state(0, 0, "failed", seq=5, done=4, op="all_reduce", numel=8),
              1: _state(1, 1, "running", seq=5, done=5)}
    assert name_culprits_after_exit(states, local_count=2) == ([1], "not inside the collective the others are "
                                                                   "waiting in")


def test_after_exit_a_rank_torn_down_before_init_is_still_the_one_that_never_reached_it():
    # the late rank was SIGTERMed in its sleep when the other's init timed out: both say "failed" now
    states = {0: _state(0, 0, "failed", seq=0), 1: _state(1, 1, "failed", seq=0)}
    states[0] = replace(states[0], failed_in="in-init")
    states[1] = replace(states[1], failed_in="before-init")
    assert name_culprits_after_exit(states, local_count=2) == \
        ([1], "never reached init_process_group while the others waited in it")
    # without the phase it failed in (reports before it), "failed" stands for "in the collective"
    plain = {r: replace(s, failed_in=None) for r, s in states.items()}
    assert name_culprits_after_exit(plain, local_count=2)[0] == [0, 1]


def test_the_whole_jobs_ranks_are_expected_when_judged_from_its_store():
    # ranks 0 and 1 (another machine) never published; a machine's block of 2 would not notice rank 0
    states = {2: _state(2, 0, "in-collective", seq=3), 3: _state(3, 1, "in-collective", seq=3)}
    assert name_culprits(states, local_count=2, now=NOW, stale_s=2)[0] == [2, 3]  # this machine's view
    assert name_culprits(states, local_count=2, now=NOW, stale_s=2, expected=[0, 1, 2, 3]) == \
        ([0, 1], "never started (no status written)")


# The victim's launcher in tests/integration/test_drill_two_launchers.py (late_rank, --nnodes 2 --nproc 1,
# --timeout 6), as CI and a loaded machine saw it. Rank 0 (the other machine, read from the job's store) gave
# up waiting in init at 610.8 when its store wait timed out; nothing on the victim's machine tore rank 1 down
# (its launcher's elastic agent does not see a rank of another machine fail), so rank 1 slept out its 66 s,
# entered init at 670.7 and failed there at once (the peer was gone). Both last words say "failed in init".
def _late_rank_after_the_wait_ended():
    rank0 = _state(0, 0, "failed", heartbeat=610.8, failed_in="in-init", failed_in_since=604.8, failed_at=610.8,
                   error="DistStoreError: wait timeout after 6000ms")
    rank1 = _state(1, 0, "failed", heartbeat=670.75, failed_in="in-init", failed_in_since=670.7, failed_at=670.75,
                   error="RuntimeError: Gloo connectFullMesh failed ... Connection refused",
                   injected="sleep before init_process_group", injected_at=604.7)
    return {0: rank0, 1: rank1}


def test_after_exit_a_rank_that_reached_init_after_the_others_gave_up_is_the_late_one():
    states = _late_rank_after_the_wait_ended()
    assert name_culprits_after_exit(states, local_count=1, expected=[0, 1]) == \
        ([1], "never reached init_process_group while the others waited in it")
    # without when each entered init (what ranks wrote before), this is the wrong verdict CI saw
    unknown = {r: replace(s, failed_in_since=None) for r, s in states.items()}
    assert name_culprits_after_exit(unknown, local_count=1, expected=[0, 1]) == \
        ([0, 1], "every rank is inside the same collective (the library or the link is stuck)")


def test_after_exit_a_rank_that_entered_the_collective_after_the_others_gave_up_is_behind():
    # the stall drill across machines: rank 1 stalled after collective 5, rank 0 gave up in collective 6 at 50;
    # rank 1 woke long after, entered collective 6 and failed in it too
    states = {0: _state(0, 0, "failed", seq=6, done=5, failed_in="in-collective", failed_in_since=40.0,
                        failed_at=50.0),
              1: _state(1, 0, "failed", seq=6, done=5, failed_in="in-collective", failed_in_since=120.0,
                        failed_at=120.1)}
    assert name_culprits_after_exit(states, local_count=1, expected=[0, 1]) == \
        ([1], "entered 5 collectives while others entered 6")


def test_after_exit_ranks_that_waited_together_are_not_rewound():
    # both were inside the collective before either gave up: still "the library or the link"
    states = {r: _state(r, r, "failed", seq=3, done=2, op="all_reduce", numel=8, failed_in="in-collective",
                        failed_in_since=40.0 + r, failed_at=50.0 + r) for r in (0, 1)}
    assert name_culprits_after_exit(states, local_count=2)[0] == [0, 1]
    # a rank that crashed outside any collective gave up no wait: a peer entering after its crash is not late
    crashed = {0: _state(0, 0, "failed", seq=3, done=3, failed_in="running", failed_in_since=30.0, failed_at=41.0),
               1: _state(1, 1, "failed", seq=4, done=3, failed_in="in-collective", failed_in_since=42.0,
                         failed_at=52.0)}
    assert name_culprits_after_exit(crashed, local_count=2) == \
        ([0], "entered 3 collectives while others entered 4")


def _waiting(rank: int, seq: int, machine: str, heartbeat: float) -> RankState:
    return RankState(rank=rank, local_rank=rank % 2, pid=100 + rank, phase="in-collective", seq=seq, done=seq - 1,
                     op="all_reduce", numel=1024, world_size=4, node_rank=rank // 2, host="vm", address=machine,
                     heartbeat=heartbeat, since=heartbeat - 5)


def test_after_a_failure_elsewhere_the_failed_ranks_torn_down_sibling_is_not_frozen_the_failed_rank_is_named():
    """Rank 2 (machine b) raised inside collective #6; b's launcher SIGTERMed rank 3, which left no last word
    and stopped beating. Ranks 0 and 1 (here) wait in #6. Found in review: rank 3 was named, 'heartbeat
    stopped', and without it every rank was named."""
    now = time.time()
    job = {0: _waiting(0, 6, "a", now), 1: _waiting(1, 6, "a", now), 3: _waiting(3, 6, "b", now - 30),
           2: replace(_waiting(2, 6, "b", now - 30), phase="failed", failed_in="in-collective", failed_at=now - 30,
                      failed_in_since=now - 35)}
    culprits, why = status.name_culprits_after_failure(job, 2, now, stale_s=2.0, expected=[0, 1, 2, 3],
                                                       mine={0, 1}, failed=[2])
    assert culprits == [2] and "failed inside the collective" in why
    # a rank HERE that stopped beating is still named first
    frozen_here = {**job, 1: replace(job[1], heartbeat=now - 30)}
    assert status.name_culprits_after_failure(frozen_here, 2, now, stale_s=2.0, expected=[0, 1, 2, 3],
                                              mine={0, 1}, failed=[2])[0] == [1]


def test_a_slow_rank_is_not_rewound_when_another_never_reached_the_collective():
    """Three ranks: rank 2 crashed while running after 2 collectives; rank 0 gave up in #3 first, and rank 1,
    slower, entered #3 after that and failed there. Rank 2 held them up, not rank 1 (found in review)."""
    t = 1000.0
    base = dict(local_rank=0, op="all_reduce", numel=4, world_size=3, node_rank=0, host="vm", heartbeat=t)
    job = {0: RankState(rank=0, pid=100, phase="failed", seq=3, done=2, failed_in="in-collective", failed_at=5.0,
                        failed_in_since=4.0, **base),
           1: RankState(rank=1, pid=101, phase="failed", seq=3, done=2, failed_in="in-collective", failed_at=5.2,
                        failed_in_since=5.1, **base),
           2: RankState(rank=2, pid=102, phase="failed", seq=2, done=2, failed_in="running", failed_at=3.0, **base)}
    culprits, why = status.name_culprits_after_exit(job, 3, expected=[0, 1, 2])
    assert culprits == [2], why
