"""The watcher's decisions, from status snapshots alone: what is progress, who waits, when it is a hang."""

from ddplab.job.watch import is_hung, progress_key, waiting_ranks


def st(phase="running", torch_call=None, enqueued=3, completed=3):
    return {"phase": phase, "where": {"torch_call": torch_call},
            "progress": {"0": {"enqueued": enqueued, "started": -1, "completed": completed}}}


def test_flight_recorder_numbers_phases_and_calls_are_progress_but_user_frames_are_not():
    base = {0: st(), 1: st()}
    assert progress_key(base) == progress_key({0: st(), 1: st()})
    moved = {0: {**st(), "where": {"torch_call": None, "frames": ["train.py:99 in step"]}}, 1: st()}
    assert progress_key(moved) == progress_key(base)
    for changed in ({0: st(enqueued=4, completed=3), 1: st()}, {0: st(completed=2), 1: st()},
                    {0: st(phase="finished"), 1: st()}, {0: st(torch_call="all_reduce"), 1: st()},
                    {0: st()}):
        assert progress_key(changed) != progress_key(base)


def test_waiting_means_inside_a_distributed_call_or_with_a_collective_pending():
    statuses = {0: st(torch_call="all_reduce"), 1: st(enqueued=4, completed=3), 2: st(), 3: st(phase="finished"),
                4: st(torch_call="init_process_group")}
    assert waiting_ranks(statuses) == [0, 1, 4]


def test_a_hang_needs_a_waiting_rank_and_the_full_timeout():
    waiting = {0: st(torch_call="all_reduce"), 1: st()}
    computing = {0: st(), 1: st()}
    assert is_hung(waiting, quiet_s=5.0, hang_timeout_s=5.0)
    assert not is_hung(waiting, quiet_s=4.9, hang_timeout_s=5.0)
    assert not is_hung(computing, quiet_s=600.0, hang_timeout_s=5.0)  # long compute or I/O: nobody waits
    assert not is_hung(waiting, quiet_s=600.0, hang_timeout_s=None)  # --hang-timeout 0
