"""The state-based rules of supervision, pure functions the watcher and the judge ask: what counts as progress,
who waits, who is behind, from every rank's status (``RankState``: this machine's files, or the job's store).

A rank's phase is what it said (a lab workload), or, for a user's script, what its beacon saw (``phase_of``).
Comparing collectives entered across ranks (``seq``) names the rank that never arrived or fell behind, not the
first rank to die (which torchrun blames). Ranks are named by their GLOBAL rank everywhere.
"""

from __future__ import annotations

import json
from dataclasses import replace

from ..platform.flight_recorder import counts_lag
from ..records.codec import RecordError, from_json
from ..records.supervision import RankState
from ..basics.rundir import RunDir

WAITING_PHASES = ("in-collective", "in-init")
END_PHASES = ("finished", "failed")
# Phases a rank says of itself; "running" is refined from what its beacon saw (phase_of).
SAID_PHASES = ("before-init", "in-init", "in-collective", "timing", "stalled", "exec", "finished", "failed")


def phase_of(state: RankState) -> str:
    """The rank's phase: as it said, or, while it says only "running", as its beacon saw its main thread."""
    if state.phase in SAID_PHASES or state.where is None:
        return state.phase
    call = state.where.torch_call
    if call == "init_process_group":
        return "in-init"
    if call or pending(state):
        return "in-collective"
    if state.in_process_group is False and not state.progress and state.seq == 0:
        return "before-init"
    return "running"


LAG_S = 2.0  # the generic recorder's "completed" can trail a returned call by up to about a second


def pending(state: RankState) -> bool:
    """A collective its flight recorder shows enqueued and not completed: the rank waits on others wherever its main
    thread is (one issued from C++, e.g. DDP's reducer, leaves no torch.distributed frame, only this count). Where
    "completed" lags (``counts_lag``: gloo), it is a wait only once its beacon saw it persist for LAG_S."""
    if not any(p.enqueued > p.completed for p in (state.progress or {}).values()):
        return False
    if not counts_lag(state.recorder):
        return True
    return state.pending_since is not None and state.heartbeat - state.pending_since >= LAG_S


def is_waiting(state: RankState) -> bool:
    """Waiting on others: inside init or a collective (said, or seen), or with a collective pending."""
    return phase_of(state) in WAITING_PHASES or pending(state)


def importing(state: RankState) -> bool:
    """Still loading its code: before init, its main thread inside an import (`import torch` takes seconds)."""
    return phase_of(state) == "before-init" and state.where is not None and state.where.importing


def is_hung(states: dict[int, RankState], quiet_s: float, hang_timeout_s: float | None, now: float,
            stale_s: float, active: set[int] | None = None, hold_for_imports: bool = True) -> bool:
    """Nothing progressed for the hang timeout while a rank that still beats waits on others, or while every rank
    still running is frozen and idle.

    A frozen rank (SIGSTOP, the GIL held in a C call) holds up whoever waits for it, and is no hang while nobody
    does (long C calls). Frozen ranks that used no CPU in the timeout (``active``: those that did; None: all) with
    nobody left to wait are stuck, e.g. at exit holding the GIL. A frozen, active rank still importing is slow (a
    dlopen holds the GIL for seconds): it holds the clock while ``hold_for_imports``."""
    if not hang_timeout_s or quiet_s < hang_timeout_s:
        return False
    running = {r: s for r, s in states.items() if s.phase not in END_PHASES}
    frozen = set(frozen_ranks(running, now, stale_s))
    working = set(running) if active is None else active
    if hold_for_imports and any(importing(running[r]) and r in working for r in frozen):
        return False
    if any(is_waiting(s) for r, s in running.items() if r not in frozen):
        return True
    return bool(running) and frozen == set(running) and not frozen & working


def _flight(state: RankState) -> tuple:
    return tuple(sorted((pg, p.enqueued, p.completed) for pg, p in (state.progress or {}).items()))


def _modules_loaded(state: RankState) -> int | None:
    """How many modules a rank still importing its code has loaded: it grows while the import makes progress. Not
    its frames: a loop that never ends inside an import moves its line numbers for ever."""
    return state.where.modules if importing(state) else None


def read_states(run: RunDir) -> dict[int, RankState]:
    """Every rank's last status on this machine, by global rank (a file being replaced is skipped)."""
    out = {}
    for f in run.status_files():
        try:
            state = from_json(RankState, json.loads(f.read_text()))
        except (ValueError, OSError, RecordError):
            continue
        out[state.rank] = state
    return out


def progress_key(states: dict[int, RankState]) -> tuple:
    """What counts as progress: a rank's phase, collectives entered or completed (its counts or its recorder's) or
    torch.distributed call changing, a rank appearing, or a rank still importing loading modules. Not frames: a
    rank spinning in its own code moves its frames for ever."""
    return tuple(sorted((r, s.phase, s.in_process_group, s.seq, s.done, s.torch_call, _flight(s),
                         _modules_loaded(s)) for r, s in states.items()))


def expected_ranks(states: dict[int, RankState], local_count: int) -> list[int] | None:
    """This machine's global ranks: ``local_count`` from its lowest rank that reported; None before any did."""
    if not states:
        return None
    base = states[min(states)].node_base
    return list(range(base, base + local_count))


def name_culprits(states: dict[int, RankState], local_count: int, now: float,
                  stale_s: float, expected: list[int] | None = None) -> tuple[list[int], str]:
    """The ranks holding the others up, and why, from a snapshot of the ranks' statuses."""
    return (_not_started(states, local_count, expected)
            or _frozen(frozen_while_others_beat(states, now, stale_s), stale_s)
            or _holding_up(states, waiting_phases=("in-collective",)))


def frozen_while_others_beat(states: dict[int, RankState], now: float, stale_s: float,
                             among: set[int] | None = None) -> list[int]:
    """The frozen ranks (of ``among``, None: all) while others still beat: when every rank is silent at once, the
    silence tells nobody apart (the whole machine stalled, or the watcher itself was starved between its read and
    its verdict)."""
    frozen = [r for r in frozen_ranks(states, now, stale_s) if among is None or r in among]
    return frozen if len(frozen) < len(states) else []


def frozen_ranks(states: dict[int, RankState], now: float, stale_s: float) -> list[int]:
    """Ranks still running (not ended) whose heartbeat has not been heard for more than ``stale_s``."""
    return sorted(r for r, s in states.items() if s.phase not in END_PHASES and now - s.heartbeat > stale_s)


def _frozen(frozen: list[int], stale_s: float) -> tuple[list[int], str] | None:
    return (frozen, f"heartbeat stopped for more than {stale_s:.0f} s (process paused or wedged)") if frozen else None


def name_culprits_after_exit(states: dict[int, RankState], local_count: int,
                             expected: list[int] | None = None) -> tuple[list[int], str]:
    """The same judgement from each rank's last status, once the ranks are gone (heartbeats say nothing then). A
    failed rank is judged in the phase it failed in; "failed" stands where its status said "in-collective".

    Last words are not from one moment: a rank that entered init or a collective only after another gave up
    waiting there arrived late, and failed only because the others were gone. So each rank is judged as it stood
    when the first wait was given up (across machines a late rank left running may join and fail "in init")."""
    states = {r: _before_failing(s) for r, s in _as_when_first_waiter_gave_up(states).items()}
    return (_not_started(states, local_count, expected)
            or _holding_up(states, waiting_phases=("in-collective", "failed")))


def _before_failing(state: RankState) -> RankState:
    if state.phase == "failed" and state.failed_in not in (None, "in-collective"):
        return replace(state, phase=state.failed_in)
    return state


def _as_when_first_waiter_gave_up(states: dict[int, RankState]) -> dict[int, RankState]:
    """Each rank as it stood when the first rank gave up waiting (failed in init or in a collective): one that
    entered its waiting phase only after another had given up is put back before it."""
    gave_up = {r: s.failed_at for r, s in states.items() if _failed_waiting(s) and s.failed_at is not None}
    return {r: _before_entering(s) if _arrived_after_others_gave_up(r, s, gave_up)
            and not _another_is_behind(r, s, states) else s for r, s in states.items()}


def _another_is_behind(rank: int, state: RankState, states: dict[int, RankState]) -> bool:
    """Another rank never reached the phase this one arrived at late (it crashed or stalls before it): the
    others gave up waiting for that one, and this one was merely slow to arrive, not the reason."""
    for other, s in states.items():
        if other == rank:
            continue
        if phase_of(s) == "before-init" or (s.phase == "failed" and s.failed_in == "before-init"):
            return True
        if state.failed_in == "in-collective" and s.seq < state.seq:
            return True
    return False


def _failed_waiting(state: RankState) -> bool:
    return state.phase == "failed" and state.failed_in in WAITING_PHASES


def _arrived_after_others_gave_up(rank: int, state: RankState, gave_up: dict[int, float]) -> bool:
    others = [at for r, at in gave_up.items() if r != rank]
    return (_failed_waiting(state) and state.failed_in_since is not None and bool(others)
            and state.failed_in_since > min(others))


def _before_entering(state: RankState) -> RankState:
    """The rank just before it entered the phase it failed in: before init, or done with the collective before."""
    if state.failed_in == "in-init":
        return replace(state, phase="before-init")
    return replace(state, phase="running", seq=state.seq - 1, done=min(state.done, state.seq - 1))


def _not_started(states: dict[int, RankState], local_count: int,
                 expected: list[int] | None = None) -> tuple[list[int], str] | None:
    expected = expected if expected is not None else expected_ranks(states, local_count)
    if expected is None:
        return [], f"none of this machine's {local_count} rank(s) wrote a status (never started)"
    missing = [r for r in expected if r not in states]
    if missing:
        return missing, "never started (no status written)"
    return None


def _holding_up(states: dict[int, RankState], waiting_phases: tuple[str, ...]) -> tuple[list[int], str]:
    """Who is behind, by phase and collective sequence, among ranks that all wrote a status."""
    not_in_init = [r for r, s in states.items() if phase_of(s) == "before-init"]
    if not_in_init and len(not_in_init) < len(states):
        return sorted(not_in_init), "never reached init_process_group while the others waited in it"
    if not_in_init:  # every rank here: the ranks waiting for them, if any, are on other machines
        return sorted(not_in_init), "never reached init_process_group"
    elsewhere = _ranks_elsewhere(states)
    if elsewhere and all(phase_of(s) == "in-init" for s in states.values()):
        return elsewhere, NOT_JOINED_FROM_ELSEWHERE
    entered = {r: s.seq for r, s in states.items()}
    low = min(entered.values())
    if low < max(entered.values()):
        behind = sorted(r for r, v in entered.items() if v == low)
        return behind, f"entered {low} collectives while others entered {max(entered.values())}"
    waiting = [r for r, s in states.items() if phase_of(s) in waiting_phases]
    idle = sorted(r for r in states if r not in waiting)
    if waiting and idle:
        return idle, "not inside the collective the others are waiting in"
    if not any(phase_of(s) in (*waiting_phases, "in-init") for s in states.values()):
        # e.g. on one machine of a larger job, whose ranks waiting for these are elsewhere
        return idle, "stopped making progress outside any collective (no rank here waits in one)"
    ops = {(s.op, s.numel) for s in states.values() if phase_of(s) in waiting_phases}
    if len(ops) > 1:
        detail = "; ".join(f"rank {r}: {s.op}({s.numel}) #{s.seq}" for r, s in sorted(states.items()))
        return sorted(states), f"ranks issued different collectives: {detail}"
    return sorted(states), ALL_IN_ONE_COLLECTIVE


ALL_IN_ONE_COLLECTIVE = "every rank is inside the same collective (the library or the link is stuck)"
# Every rank seen (one machine's, of a job across machines) waits in init_process_group for the ranks it cannot see.
NOT_JOINED_FROM_ELSEWHERE = ("never reached init_process_group, where every rank of this machine waits for them "
                             "(ranks of other machines)")


def _ranks_elsewhere(states: dict[int, RankState]) -> list[int]:
    """The job's ranks no status here speaks for, by the world size the ranks were given; [] where unknown."""
    sizes = {s.world_size for s in states.values()}
    size = sizes.pop() if len(sizes) == 1 else None
    return sorted(set(range(size)) - set(states)) if size else []


def failed_elsewhere(job: dict[int, RankState], mine: dict[int, RankState]) -> list[int]:
    """Ranks of other machines that failed while every rank of this machine (``mine``) still runs: elastic ends a
    group only when one of its OWN ranks ends or its store stops answering, so a peer's failure would leave these
    running. Empty when a rank here ended too (elastic tears its group down) or none wrote a status yet."""
    if not mine or any(s.phase in END_PHASES for s in mine.values()):
        return []
    return sorted(r for r, s in job.items() if r not in mine and s.phase == "failed")


def name_culprits_after_failure(states: dict[int, RankState], local_count: int, now: float, stale_s: float,
                                expected: list[int] | None = None, mine: set[int] | None = None,
                                failed: list[int] = ()) -> tuple[list[int], str]:
    """The culprits where some ranks (``failed``, on other machines) failed and others still run: a rank of this
    machine (``mine``; None: all) whose heartbeat stopped first (only ours count: the others' beats stopped as
    their launcher ended them), then the last words; where those cannot tell the ranks apart, the failed ones."""
    here = states if mine is None else {r: s for r, s in states.items() if r in mine}
    frozen = _frozen(frozen_ranks(here, now, stale_s), stale_s)
    if frozen:
        return frozen
    culprits, why = name_culprits_after_exit(states, local_count, expected)
    if failed and why == ALL_IN_ONE_COLLECTIVE:  # no rank stands out: every one waited in it together
        return sorted(failed), "failed inside the collective the others waited in with it"
    return culprits, why


def silent_machines(job: dict[int, RankState], store_machine: str | None = None) -> dict[str, list[int]]:
    """Machines of a job across machines that went silent when it failed: machine -> its global ranks.

    A vanished machine's ranks never report an end, while the others' fail within moments and say so (timing
    cannot tell them apart, last words can). Where the store stopped answering, its machine (``store_machine``)
    is named if its ranks reported no end."""
    from ..cluster.topology import machines

    by_machine = machines({r: s.machine for r, s in job.items()})
    quiet = {m: ranks for m, ranks in by_machine.items() if not any(job[r].phase in END_PHASES for r in ranks)}
    if any(s.phase == "failed" for s in job.values()):
        return quiet if len(quiet) < len(by_machine) else {}
    if store_machine is not None and store_machine in quiet:
        return {store_machine: quiet[store_machine]}
    return {}


# The kind of culprit each reason above names (records/supervision.py Culprit.kind), first match wins.
_KINDS = (("never started", "never-started"), ("wrote a status", "never-started"),
          ("heartbeat stopped", "frozen"), ("never reached init_process_group", "never-reached-init"),
          ("collectives while others entered", "behind"), ("different collectives", "desync"),
          ("not inside the collective", "not-in-collective"), ("outside any collective", "not-in-collective"),
          ("failed inside the collective", "raised"), (ALL_IN_ONE_COLLECTIVE, "stuck-together"))


def kind_of(reason: str) -> str:
    """The culprit's kind for a reason these rules gave."""
    return next((kind for words, kind in _KINDS if words in reason), "stuck-together")
