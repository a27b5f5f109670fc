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


GLOO = "_dump_fr_trace_json"  # the generic recorder: its "completed" can trail a returned call by about a second
BACKWARD = ("torch/autograd/graph.py:979 in _engine_run_backward", "torch/_tensor.py:623 in backward",
            "train.py:13 in <module>")


def test_a_collective_issued_from_cpp_is_waited_in_on_any_backend():
    """DDP's reducer issues the gradient all_reduce from C++ inside backward(): no torch.distributed frame on the
    main thread, only the recorder's pending count. gloo's counts that as a wait too, once it persists for the hang
    timeout (the quiet clock); a lag that catches up changes the count, and so is progress."""
    in_backward = st(enqueued=11, completed=10, recorder=GLOO, frames=BACKWARD)
    stalled = st(enqueued=10, completed=10, recorder=GLOO, frames=("train.py:9 in <module>",))
    assert is_waiting(in_backward) and phase_of(in_backward) == "in-collective" and not is_waiting(stalled)
    assert is_hung({0: in_backward, 1: stalled}, 5.0, 5.0, NOW, 2.0)
    assert not is_hung({0: in_backward, 1: stalled}, 4.9, 5.0, NOW, 2.0)
    caught_up = st(enqueued=11, completed=11, recorder=GLOO, frames=BACKWARD)
    assert progress_key({0: in_backward, 1: stalled}) != progress_key({0: caught_up, 1: stalled})


def test_a_hang_needs_a_rank_that_beats_and_waits_and_the_full_timeout():
    waiting = {0: st(torch_call="all_reduce"), 1: st()}
    computing = {0: st(), 1: st()}
    assert is_hung(waiting, 5.0, 5.0, NOW, 2.0)
    assert not is_hung(waiting, 4.9, 5.0, NOW, 2.0)
    assert not is_hung(computing, 600.0, 5.0, NOW, 2.0)  # long compute or I/O: nobody waits
    assert not is_hung(waiting, 600.0, None, NOW, 2.0)  # --hang-timeout 0
    paused = st(heartbeat=NOW - 30)  # SIGSTOP, the GIL held in C code, a process that exec'd away
    assert is_hung({0: st(torch_call="all_reduce"), 1: paused}, 5.0, 5.0, NOW, 2.0)  # the others wait on it
    assert not is_hung({0: st(), 1: paused}, 600.0, 5.0, NOW, 2.0)  # nobody waits for it yet
    # a rank frozen while its last status showed it waiting waits on nobody that we can see
    assert not is_hung({0: st(torch_call="all_reduce", heartbeat=NOW - 30), 1: st()}, 600.0, 5.0, NOW, 2.0)
    assert not is_hung({0: st(phase="finished", heartbeat=NOW - 30), 1: st()}, 5.0, 5.0, NOW, 2.0)


def test_frozen_ranks_that_compute_are_no_hang_and_idle_ones_left_alone_are():
    """Every rank in a long C call holding the GIL: no heartbeat anywhere, nobody waits. Computing (their processes
    use CPU) they are healthy; idle (a lock, a sleep) with nobody else running they are stuck: a rank that hangs at
    exit holding the GIL after the others finished was never declared."""
    both_frozen = {0: st(heartbeat=NOW - 30), 1: st(heartbeat=NOW - 30)}
    assert not is_hung(both_frozen, 600.0, 5.0, NOW, 2.0, active={0, 1})
    assert not is_hung(both_frozen, 600.0, 5.0, NOW, 2.0)  # not known (another machine's): taken as active
    assert not is_hung(both_frozen, 600.0, 5.0, NOW, 2.0, active={1})
    assert is_hung(both_frozen, 5.0, 5.0, NOW, 2.0, active=set())
    at_exit = {0: st(phase="finished", heartbeat=NOW - 30), 1: st(heartbeat=NOW - 30)}
    assert is_hung(at_exit, 5.0, 5.0, NOW, 2.0, active=set())
    assert not is_hung(at_exit, 5.0, 5.0, NOW, 2.0, active={1})


def test_an_import_that_loads_modules_is_progress_and_one_that_stopped_is_not():
    def importing(modules, heartbeat=NOW):
        return RankState(rank=1, pid=2, phase="running", heartbeat=heartbeat, in_process_group=False,
                         where=Where(None, None, ["vocab.py:3 in <module>"], True, modules))

    in_init = st(torch_call="init_process_group")
    assert progress_key({0: in_init, 1: importing(800)}) != progress_key({0: in_init, 1: importing(812)})
    # a loop that never ends inside an import moves its lines, not the modules loaded
    assert progress_key({0: in_init, 1: importing(812)}) == progress_key({0: in_init, 1: importing(812)})
    assert is_hung({0: in_init, 1: importing(812)}, 5.0, 5.0, NOW, 2.0)
    # frozen inside an import (a large library's dlopen holds the GIL): slow while its process works, and for no
    # longer than the start grace; stopped (SIGSTOP) or idle, it is frozen
    dlopen = {0: in_init, 1: importing(812, heartbeat=NOW - 8)}
    assert not is_hung(dlopen, 8.0, 5.0, NOW, 2.0, active={0, 1})
    assert is_hung(dlopen, 8.0, 5.0, NOW, 2.0, active={0, 1}, hold_for_imports=False)
    assert is_hung(dlopen, 8.0, 5.0, NOW, 2.0, active={0})
