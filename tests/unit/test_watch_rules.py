"""The watcher's decisions, from status snapshots alone (supervision/states.py): what is progress, who waits,
when it is a hang. One set of rules for a lab workload's counted collectives and a script's flight recorder."""

from ddplab.records.supervision import GroupProgress, RankState, Where
from ddplab.supervision.states import is_hung, is_waiting, phase_of, progress_key

NOW = 1000.0
NCCL = "_dump_nccl_trace_json"  # an asynchronous recorder: a pending collective means the rank waits


def st(phase="running", torch_call=None, enqueued=3, completed=3, recorder=NCCL, frames=("train.py:10 in main",),
       heartbeat=NOW):
    return RankState(rank=0, pid=1, phase=phase, heartbeat=heartbeat, recorder=recorder, in_process_group=True,
                     where=Where(torch_call, None, list(frames)),
                     progress={"0": GroupProgress(enqueued, -1, completed)})


def test_flight_recorder_numbers_phases_and_calls_are_progress_but_user_frames_are_not():
    base = {0: st(), 1: st()}
    assert progress_key(base) == progress_key({0: st(), 1: st()})
    moved = {0: st(frames=("train.py:99 in step",)), 1: st()}
    assert progress_key(moved) == progress_key(base)
    for changed in ({0: st(enqueued=4, completed=3), 1: st()}, {0: st(completed=2), 1: st()},
                    {0: st(phase="finished"), 1: st()}, {0: st(torch_call="all_reduce"), 1: st()},
                    {0: st()}):
        assert progress_key(changed) != progress_key(base)


def test_waiting_means_inside_a_distributed_call_or_with_a_collective_pending():
    statuses = {0: st(torch_call="all_reduce"), 1: st(enqueued=4, completed=3), 2: st(), 3: st(phase="finished"),
                4: st(torch_call="init_process_group")}
    assert [r for r, s in statuses.items() if is_waiting(s)] == [0, 1, 4]
    assert phase_of(statuses[4]) == "in-init" and phase_of(statuses[0]) == "in-collective"


def test_the_generic_recorders_lagging_count_is_no_wait():
    """gloo's recorder can show a collective enqueued and not completed after the call returned (torch 2.13):
    there the main thread's location decides."""
    lagging = st(enqueued=4, completed=3, recorder="_dump_fr_trace_json")
    assert not is_waiting(lagging) and phase_of(lagging) == "running"


def test_a_hang_needs_a_waiting_or_frozen_rank_and_the_full_timeout():
    waiting = {0: st(torch_call="all_reduce"), 1: st()}
    computing = {0: st(), 1: st()}
    assert is_hung(waiting, 5.0, 5.0, NOW, 2.0)
    assert not is_hung(waiting, 4.9, 5.0, NOW, 2.0)
    assert not is_hung(computing, 600.0, 5.0, NOW, 2.0)  # long compute or I/O: nobody waits
    assert not is_hung(waiting, 600.0, None, NOW, 2.0)  # --hang-timeout 0
    assert is_hung({0: st(), 1: st(heartbeat=NOW - 30)}, 5.0, 5.0, NOW, 2.0)  # paused (SIGSTOP): others wait on it
    assert not is_hung({0: st(phase="finished", heartbeat=NOW - 30), 1: st()}, 5.0, 5.0, NOW, 2.0)
