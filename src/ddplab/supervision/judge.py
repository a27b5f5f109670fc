"""One judge for every way a rank can fail: the evidence of a job that did not succeed in, the culprit out.

Every multi-rank job ddplab supervises is judged here, by one ordered list of rules over the same evidence
(evidence.py). The first rule that finds something names the culprit:

  1. failed at start   ranks that failed on their own before their first collective, with their error
  2. never started     ranks that never wrote a status, when no rank failed on its own
  3. desync            ranks that issued something else at one sequence number (flight records)
  4. first to fail     the first rank to end by a signal or a non-zero status, or to raise: the order of deaths is
                       the evidence. Later timeouts and lost connections are its victims; ranks the launcher
                       stopped are never culprits; ranks that failed the same way within a second are named with it
  4b. novel call       one side of a collective is lost (no own failure, or a first death by a SIGABRT its status
                       cannot place): the rank whose last call is unlike its earlier ones (flight records)
  5. frozen            ranks whose heartbeat stopped while the others' went on when a hang was declared
  6. waiting           (torch's flight-recorder analyzer first, where it works) the ranks that never arrived where
                       the others wait, outside init while the others wait in it, or in their own code while the
                       others wait in a collective; else no rank stands out.

A job stopped by Ctrl+C or SIGTERM to its launcher has no culprit, unless a rank failed on its own before.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..records.supervision import Analyzer, CollectiveCall, Culprit, Hang
from . import flight, states
from .evidence import RankEvidence
from .flight import ANALYZER, Finding, _list

SAME_BUG_WINDOW_S = 1.0  # ranks failing the same way this close to the first: one bug everywhere
STALE_S = 2.0  # a rank not heard for this long when a hang is declared is frozen (the watcher's STALE_S)

# A rank's error that is the consequence of another's failure, or of waiting for one: it gave up waiting
# (a timeout of the store, the collective, the watchdog) or lost its peer (a connection closed under it).
_VICTIM_WORDS = re.compile(
    r"timed out|timeout|time out|DistStoreError|Watchdog|Connection reset|Connection closed|closed by peer"
    r"|Connection refused|Broken pipe|ncclRemoteError|remote process|communicator was aborted|aborted"
    r"|Failed to recv|got 0 bytes|Socket Timeout|peer|SIGTERM", re.I)


def gave_up_or_lost_peer(text: str | None) -> bool:
    """The error says the rank waited too long or lost a peer: a victim's words, not a culprit's."""
    return bool(text) and bool(_VICTIM_WORDS.search(text))


def name_culprit(evidence: dict[int, RankEvidence], expected: list[int] | None = None, *,
                 hang: Hang | None = None, interrupted_at: float | None = None, local_count: int | None = None,
                 use_analyzer: bool = True, hosts: dict[int, str | None] | None = None,
                 local_ranks: set[int] | None = None) -> Culprit | None:
    """The ranks that held the others up, why, the collective and the evidence; None for a stopped job (module doc)."""
    own = own_failures(evidence)
    if interrupted_at is not None and not any(at <= interrupted_at for at, _ in own):
        return None
    analyzer: dict = {"tool": ANALYZER, "status": "not run", "why": "a rule before it named the culprit"}
    finding = _failed_at_start(evidence, own) or (None if own else _never_started(evidence, expected)) \
        or flight.desync(evidence) or _aborted_mid_call(evidence, own) or _first_to_fail(evidence, own) \
        or flight.novel_call(evidence)
    # A heartbeat that stopped while the others beat on says why the rank never joined: it outranks torch's
    # analyzer, which can only say that it did not (on NCCL it names the same rank "behind").
    finding = finding or _frozen(evidence, hang, local_ranks)
    if finding is None and use_analyzer:
        finding, analyzer = flight.from_torch_analyzer(evidence)
    finding = finding or _waiting(evidence, expected, hang, local_count, local_ranks)
    return _culprit(finding, analyzer, evidence, hosts)


# ---------------------------------------------------------------------------------------- failures of their own

def own_failures(evidence: dict[int, RankEvidence]) -> list[tuple[float, int]]:
    """(when, rank) of every rank that failed on its own, first first: it raised an error of its own (not a timeout
    or a lost peer), or ended by a signal or a non-zero status the launcher did not cause and no such error explains."""
    found = []
    for rank, ev in evidence.items():
        text, at = ev.error_text, ev.error_at
        if text is not None and at is not None:
            if not gave_up_or_lost_peer(text):
                found.append((at, rank))
            continue
        end = ev.end
        if end is None or end.ok or end.by_launcher or end.at is None:
            continue
        if end.signal == "SIGABRT" and ev.abort != "own code" and (ev.phase in states.WAITING_PHASES
                                                                   or ev.abort == "library"):
            # The library aborts a rank waiting in it (NCCL's watchdog; gloo's receiver of a message of the wrong
            # size). The rank's own fault only where faulthandler saw its own code abort, or it was not waiting.
            continue
        found.append((end.at, rank))
    return sorted(found)


def _at_start(ev: RankEvidence) -> bool:
    """Before its first collective: no status at all, a command that replaced the rank (--no-python), or a status
    that never showed a process group or a collective."""
    s = ev.status
    if s is None or s.phase == "exec" or (s.phase == "failed" and s.failed_in in ("before-init", "exec")):
        return True
    return s.seq == 0 and not any(p.enqueued > 0 for p in (s.progress or {}).values()) and not s.in_process_group \
        and (s.failed_in or states.phase_of(s)) in ("before-init", "running", "exec")


def _failed_at_start(evidence: dict[int, RankEvidence], own: list[tuple[float, int]]) -> Finding | None:
    if not own or _collectives_done(evidence) or not _at_start(evidence[own[0][1]]):
        return None
    ranks = _same_bug(evidence, own, _at_start)
    lines = [f"rank {r}: {_how_it_failed(evidence[r])}" for r in ranks]
    return Finding(ranks, "failed-at-start", f"rank(s) {_list(ranks)} failed at start, before any collective: "
                   + "; ".join(_how_it_failed(evidence[r]) for r in ranks), None, lines + _others(evidence, ranks))


def _collectives_done(evidence: dict[int, RankEvidence]) -> bool:
    """Some rank issued a collective of the default group, which every rank must enter: so every rank got past
    its start, whatever an older heartbeat of one that died by a signal said."""
    return any(ev.progress.get(flight.DEFAULT_PG, -1) > 0 for ev in evidence.values())


def _first_to_fail(evidence: dict[int, RankEvidence], own: list[tuple[float, int]]) -> Finding | None:
    if not own:
        return None
    first = evidence[own[0][1]]
    ranks = _same_bug(evidence, own, lambda ev: True)
    compared = _compared_with(evidence, ranks) if first.error_text is not None else None
    if compared:
        return compared
    if first.end and first.end.oom_killed and not first.error:
        kind = "oom-killed"
    elif first.error_text is not None:
        kind = "raised"
    else:
        kind = "died"
    missed = _collective_missed(evidence, ranks)
    where = f"; the others waited for it in {flight.describe(missed)}" if missed else ""
    caveat = _abort_caveat(evidence, first, kind)
    if len(ranks) > 1:  # one bug that every one of them hit: no rank of them is the culprit of the others
        who = f"every rank ({_list(ranks)})" if len(ranks) == len(evidence) else f"ranks {_list(ranks)}"
        said = (f"{who} failed the same way within {SAME_BUG_WINDOW_S:g} s, one bug and no single culprit: "
                f"rank {first.rank} {_how_it_failed(first)}")
    else:
        said = f"rank {first.rank} {_how_it_failed(first)}, the first to fail"
    return Finding(ranks, kind, said + f"{where}{caveat}", missed or flight.last_call(first),
                   [f"rank {r}: {_how_it_failed(evidence[r])}" for r in ranks] + _others(evidence, ranks))


def _aborted_mid_call(evidence: dict[int, RankEvidence], own: list[tuple[float, int]]) -> Finding | None:
    """The first death is a SIGABRT its status and stacks cannot place: gloo aborts the receiver of a message of the
    wrong size, so a sender's novel call is the evidence there. Any other death outweighs a novel call."""
    if not own:
        return None
    first = evidence[own[0][1]]
    if first.end is None or first.end.signal != "SIGABRT" or first.error_text is not None or first.abort:
        return None
    return flight.novel_call(evidence)


def _abort_caveat(evidence: dict[int, RankEvidence], first: RankEvidence, kind: str) -> str:
    """A rank named for a SIGABRT its status cannot place: the library aborts a rank waiting in it that way too, so
    the reader is told, with the ranks whose missing flight records could have told a desync apart."""
    if kind != "died" or first.end is None or first.end.signal != "SIGABRT":
        return ""
    missing = sorted(r for r, ev in evidence.items() if ev is not first and ev.record is None)
    lost = f"; rank(s) {_list(missing)} left no flight record to compare" if missing else ""
    return (f"; a SIGABRT is also how the collective library aborts a rank waiting in it, and its status did not "
            f"show where it was{lost}")


def _same_bug(evidence: dict[int, RankEvidence], own: list[tuple[float, int]], also) -> list[int]:
    """The first failure, and the later ones within SAME_BUG_WINDOW_S that failed the same way."""
    first_at, first = own[0]
    sign = _signature(evidence[first])
    return sorted({first} | {r for at, r in own[1:] if at - first_at <= SAME_BUG_WINDOW_S
                             and _signature(evidence[r]) == sign and also(evidence[r])})


# A rank's number in an error's words ("[1]: ...", "rank 1", "process 0"): the same bug says it on every rank.
_RANK_WORDS = re.compile(r"\[\d+\]:?|\b(?:rank|process)\s+\d+\b", re.I)
_NAMED_RANK = re.compile(r"\b(?:rank|process)\s+(\d+)\b", re.I)


def _signature(ev: RankEvidence) -> tuple:
    text = ev.error_text
    if text is not None:
        return ("error", _RANK_WORDS.sub("<rank>", (text.strip().splitlines() or [""])[0]))
    return ("end", ev.end.exit_code if ev.end else None, ev.end.signal if ev.end else None)


def _compared_with(evidence: dict[int, RankEvidence], ranks: list[int]) -> Finding | None:
    """Ranks that failed the same way, each naming one other rank in its error (DDP checks parameters against rank
    0's: "... does not match ... process 0"): two or more naming one make it the odd one out; of two ranks,
    nothing tells which is off."""
    named = set()
    for r in ranks:
        others = {int(n) for n in _NAMED_RANK.findall(evidence[r].error_text or "")} - {r}
        if len(others) != 1:
            return None
        named |= others
    if len(named) != 1:
        return None
    odd = named.pop()
    if odd not in evidence or odd in ranks:
        return None
    said = (evidence[ranks[0]].error_text or "").strip().splitlines()[0][:200]
    lines = [f"rank {r}: {_how_it_failed(evidence[r])}" for r in ranks] + _others(evidence, ranks)
    if len(ranks) >= 2:
        return Finding([odd], "desync", f"rank(s) {_list(ranks)} raised, each comparing itself with rank {odd} "
                       f"and disagreeing with it ({said}): rank {odd} is the odd one out", None, lines)
    if len(evidence) == 2:
        pair = sorted([odd, *ranks])
        return Finding(pair, "desync", f"rank {ranks[0]} raised, disagreeing with rank {odd} ({said}); with two "
                       "ranks nothing tells which of them is off", None, lines)
    return None


def _how_it_failed(ev: RankEvidence) -> str:
    parts = []
    if ev.error_text is not None:
        first_line = (ev.error_text.strip().splitlines() or [""])[0]
        parts.append(f"raised {first_line[:200]}")
    if ev.end and not ev.end.ok:
        parts.append(f"ended by {ev.end.in_words()}")
    elif ev.end is None and ev.status and ev.status.exit_code:
        parts.append(f"was to exit {ev.status.exit_code}")
    return " and ".join(parts) or "failed"


def _collective_missed(evidence: dict[int, RankEvidence], culprits: list[int]) -> dict | None:
    """The collective the others entered that the culprits never reached, where the flight records say."""
    found = flight.behind(evidence)
    if found and set(found.ranks) <= set(culprits) and found.collective and found.collective.get("seq"):
        return found.collective
    return None


def _others(evidence: dict[int, RankEvidence], culprits: list[int]) -> list[str]:
    return [f"rank {r}: {evidence[r].state()}" for r in sorted(evidence) if r not in culprits]


# ---------------------------------------------------------------------------------------- nobody failed alone

def _never_started(evidence: dict[int, RankEvidence], expected: list[int] | None) -> Finding | None:
    missing = [r for r in expected or () if r not in evidence or evidence[r].status is None]
    if not missing:
        return None
    return Finding(missing, "never-started", f"rank(s) {_list(missing)} never started (no status written)")


def _frozen(evidence: dict[int, RankEvidence], hang: Hang | None, local_ranks: set[int] | None) -> Finding | None:
    """Ranks whose heartbeat had stopped when the hang was declared while the others' went on."""
    if hang is None or not hang.snapshot:
        return None
    snapshot = dict(hang.snapshot)
    # Only this machine's ranks: another machine's stop beating once their own launcher has torn them down, which
    # may come before this one declares the hang. A machine cut off is a MachineLoss, judged apart.
    frozen = states.frozen_while_others_beat(snapshot, hang.declared_at, STALE_S, local_ranks)
    if not frozen:
        return None
    return Finding(frozen, "frozen", f"rank(s) {_list(frozen)}: heartbeat stopped for more than {STALE_S:.0f} s "
                   "when the hang was declared (paused: SIGSTOP, a debugger; a machine cut off; or something "
                   "holds its GIL: its stacks, read from outside, are in py-spy.txt where py-spy could read them)",
                   _collective_missed(evidence, frozen),
                   [f"rank {r}: {replace(evidence[r], status=snapshot[r]).state()}"
                    for r in sorted(evidence) if r in snapshot])


def _waiting(evidence: dict[int, RankEvidence], expected: list[int] | None, hang: Hang | None,
             local_count: int | None, local_ranks: set[int] | None) -> Finding:
    """As the job stood when it was declared hung (after a rank on another machine failed, by this machine's
    heartbeats only), or when the first rank gave up waiting."""
    snapshot = dict(hang.snapshot) if hang is not None else {}
    found = flight.behind(evidence) or flight.never_reached_init(evidence)
    if found:
        return found
    last = {r: ev.status for r, ev in evidence.items() if ev.status is not None}
    count = local_count or len(last) or 1
    failed = sorted(r for r, s in snapshot.items() if s.phase == "failed")
    if snapshot and failed:
        ranks, why = states.name_culprits_after_failure(snapshot, count, hang.declared_at, STALE_S, expected=expected,
                                                        mine=local_ranks, failed=failed)
    elif snapshot:
        ranks, why = states.name_culprits(snapshot, count, now=hang.declared_at, stale_s=STALE_S, expected=expected)
    elif last:
        ranks, why = states.name_culprits_after_exit(last, count, expected)
    else:
        return Finding([], "stuck-together", "no rank said anything: nothing tells them apart")
    kind = states.kind_of(why)
    if kind == "stuck-together":  # no rank stands out: naming them all would blame the innocent
        where = ", ".join(sorted({ev.torch_call or ev.phase or "unknown" for ev in evidence.values()}))
        return Finding([], kind, f"no rank stands out: {why}; every rank in {where}{_library_aborts(evidence)}",
                       evidence=_others(evidence, ()))
    return Finding(ranks, kind, f"rank(s) {_list(ranks)} {why}" if ranks else why,
                   flight.init_call() if kind == "never-reached-init" else None, _others(evidence, ()))


def _library_aborts(evidence: dict[int, RankEvidence]) -> str:
    """Words for ranks the collective library aborted (SIGABRT) while they waited in it, as gloo does on a transport
    error; own_failures does not count them."""
    aborted = sorted(r for r, ev in evidence.items()
                     if ev.end and ev.end.signal == "SIGABRT" and not ev.end.by_launcher and ev.error_text is None)
    if not aborted:
        return ""
    return (f"; rank(s) {_list(aborted)} aborted (SIGABRT) inside the collective library while waiting: a fault "
            f"of the library or its transport, not of a rank's code (the library's own words are in the ranks' "
            f"output)")


# ---------------------------------------------------------------------------------------- the record

def _culprit(finding: Finding, analyzer: dict, evidence: dict[int, RankEvidence],
             hosts: dict[int, str | None] | None) -> Culprit:
    call = finding.collective
    machines = None if hosts is None else {r: hosts.get(r) for r in finding.ranks}
    # Every call flight.py builds has the five keys of CollectiveCall; every analyzer answer its tool and status.
    return Culprit(ranks=list(finding.ranks), kind=finding.kind, reason=finding.reason,
                   collective=None if call is None else CollectiveCall(**call), evidence=list(finding.evidence),
                   analyzer=Analyzer(**analyzer), hosts=machines)
