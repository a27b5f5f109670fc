"""Which rank ends were elastic's teardown (supervision/job.py _teardown): the judge never names a rank the
launcher ended, so this decides who can be the culprit when a rank dies without a traceback."""

from ddplab.records.supervision import RankState
from ddplab.supervision.job import READ_SLACK_S, _teardown

T = 1000.0


def _end(at, code=None, sig=None):
    return (123, at, code, sig)


def _state(rank: int, error: str | None) -> RankState:
    return RankState(rank=rank, pid=100 + rank, phase="failed", error=error)


def test_a_sigterm_read_before_the_sigkill_that_caused_it_is_still_the_teardown():
    # kill_rank on a loaded machine: rank 1 SIGKILLed from outside, rank 0 then SIGTERMed by elastic, but the
    # launcher's threads read rank 0's end 0.2 s before rank 1's
    others_of_0 = {1: _end(T + 0.2, sig="SIGKILL")}
    others_of_1 = {0: _end(T, sig="SIGTERM")}
    assert _teardown("SIGTERM", T, others_of_0, {}) is True
    assert _teardown("SIGKILL", T + 0.2, others_of_1, {}) is False  # rank 1's death is its own


def test_a_sigterm_long_before_any_failure_is_the_ranks_own():
    assert _teardown("SIGTERM", T, {1: _end(T + READ_SLACK_S + 1, code=1)}, {}) is False


def test_a_sigterm_from_outside_is_not_excused_by_the_victim_that_lost_its_peer():
    # rank 1 SIGTERMed from outside; rank 0 then raised "Connection closed by peer" and exited 1, 50 ms later
    others = {0: _end(T + 0.05, code=1)}
    states = {0: _state(0, "RuntimeError: Connection closed by peer [127.0.0.1]:1234")}
    assert _teardown("SIGTERM", T, others, states) is False
    assert _teardown("SIGTERM", T, others, {0: _state(0, "ValueError: bad batch")}) is True


def test_a_sigkill_after_sigterms_grace_is_the_teardowns_escalation():
    # rank 0 ignored SIGTERM and was SIGKILLed 2 s after; rank 1 had exited 3 before
    assert _teardown("SIGKILL", T + 2.1, {1: _end(T, code=3)}, {}) is True
    assert _teardown("SIGKILL", T + 2.1, {1: _end(T + 0.1, sig="SIGTERM")}, {}) is True
    assert _teardown("SIGKILL", T, {1: _end(T + 0.1, code=3)}, {}) is False  # the first to die


def test_an_end_whose_time_was_not_seen_is_the_teardowns_only_after_a_failure():
    assert _teardown("SIGTERM", None, {1: _end(T, code=1)}, {}) is True
    assert _teardown("SIGTERM", None, {1: _end(T, code=0)}, {}) is False
    assert _teardown("SIGSEGV", T + 5, {1: _end(T, code=1)}, {}) is False  # only SIGTERM and SIGKILL are sent


def test_a_sigterm_after_the_victims_failure_is_the_teardown():
    # skip: rank 1 left its collectives; ranks 0 and 2 raised "Connection closed" and exited 1; rank 1, still
    # alive, was SIGTERMed by elastic after them
    states = {r: _state(r, "RuntimeError: Connection closed by peer") for r in (0, 2)}
    assert _teardown("SIGTERM", T + 0.3, {0: _end(T, code=1), 2: _end(T + 0.01, code=1)}, states) is True


class _Exits:
    def __init__(self, ends):
        self._ends = ends

    def ends(self):
        return self._ends

    def oom_evidence(self, pid):
        return None


class _Watcher:
    signalled: set = set()

    def __init__(self, ends):
        self.exits = _Exits(ends)


def test_an_exit_seen_without_its_status_is_0_only_where_elastic_reported_success():
    """Under load elastic reaped a rank before the exit watch could read its status: a healthy launch reported
    rank 1 'exit None'. Elastic's success says every rank of the machine ended with status 0."""
    from ddplab.supervision.exits import Exit
    from ddplab.supervision.job import rank_ends

    watcher = _Watcher({0: Exit(100, T, 0, None), 1: Exit(101, T + 0.1, None, None)})
    ended = rank_ends(watcher, None, {}, {}, succeeded=True)
    assert (ended[1].exit_code, ended[1].ok, ended[1].in_words()) == (0, True, "exit 0")
    unknown = rank_ends(watcher, None, {}, {}, succeeded=False)[1]
    assert unknown.exit_code is None and unknown.in_words() == "ended (status not seen)"


def test_after_the_launchers_stop_signal_a_sigterm_or_sigkill_is_the_teardown():
    """Ctrl+C of `ddplab launch` while every rank was in user code: elastic ended both with SIGTERM before the
    watcher's next poll saw the stop, and the judge named both ranks, 'ended by SIGTERM, the first to fail'."""
    from ddplab.supervision.exits import Exit
    from ddplab.supervision.job import rank_ends

    watcher = _Watcher({0: Exit(100, T + 0.1, None, "SIGTERM"), 1: Exit(101, T + 0.12, None, "SIGTERM"),
                        2: Exit(102, T + 2.2, None, "SIGKILL"), 3: Exit(103, T + 0.1, 1, None)})
    stopped = rank_ends(watcher, None, {}, {}, stop_at=T)
    assert [stopped[r].by_launcher for r in range(4)] == [True, True, True, False]  # an exit 1 stays its own
    both = _Watcher({0: Exit(100, T + 0.1, None, "SIGTERM"), 1: Exit(101, T + 0.12, None, "SIGTERM")})
    assert [e.by_launcher for e in rank_ends(both, None, {}, {}).values()] == [False, False]  # no stop: as before
    # a SIGTERM from outside well before the stop stays the rank's own; within the read slack it is the stop's
    before = _Watcher({0: Exit(100, T - READ_SLACK_S - 1, None, "SIGTERM"), 1: Exit(101, T - 0.1, None, "SIGTERM")})
    assert [e.by_launcher for e in rank_ends(before, None, {}, {}, stop_at=T).values()] == [False, True]


def test_a_rank_ended_by_the_watchers_stack_signal_is_the_launchers_doing():
    """A rank that exec'd another program does not catch faulthandler's signal, whose default action ends it: the
    report blamed "signal 38". Whatever ddplab's watcher signalled is never the rank's own cause."""
    from ddplab.supervision.evidence import RankEvidence
    from ddplab.supervision.exits import Exit
    from ddplab.supervision.job import rank_ends

    watcher = _Watcher({0: Exit(100, T + 0.3, None, "SIGTERM"), 1: Exit(101, T, None, "signal 38")})
    watcher.signalled = {101}
    ended = rank_ends(watcher, None, {}, {})
    assert (ended[1].by_launcher, ended[1].in_words()) == (True, "signal 38 (sent by the launcher)")
    state = RankState(rank=1, pid=101, phase="running")
    assert "ended by" not in RankEvidence(1, status=state, end=ended[1]).state()


def test_a_rank_the_teardown_ended_never_reads_finished_and_exited():
    """Its status said "finished" (a rank let go from a C call by the stack signal ran its script to the end), and
    then the teardown's SIGTERM ended it before it exited: how the process ended wins over the status."""
    from ddplab.records.supervision import RankEnd
    from ddplab.supervision.evidence import RankEvidence

    finished = RankState(rank=0, pid=100, phase="finished", exit_code=0)
    torn_down = RankEnd(rank=0, pid=100, at=T, exit_code=None, signal="SIGTERM", by_launcher=True)
    exited = RankEnd(rank=0, pid=100, at=T, exit_code=0, signal=None, by_launcher=False)
    assert RankEvidence(0, status=finished, end=torn_down).state() == \
        "ended by SIGTERM (the launcher's teardown), after its last status said its script was done"
    assert RankEvidence(0, status=finished, end=exited).state() == "finished its script and exited"
