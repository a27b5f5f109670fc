"""The flight records' rules, pure functions over the judge's evidence, each a ``Finding`` or None: the ranks
``behind`` a collective the others entered, a ``desync`` at one sequence number (with torch's own analyzer where
it works), the ranks that ``never_reached_init``.

A number is held against a rank only where it stopped: it finished or failed, or it answered the dump request. A
rank a signal ended has only an older heartbeat: a lower bound, never evidence.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .evidence import RankEvidence

ANALYZER = "torch.distributed.flight_recorder build_db"
DEFAULT_PG = "0"  # the recorder numbers groups in creation order: init_process_group's comes first


@dataclass
class Finding:
    """What one rule found: the culprit ranks, their kind, why, the collective, and the evidence lines."""

    ranks: list[int]
    kind: str
    reason: str
    collective: dict | None = None
    evidence: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- flight records

def op_name(entry: dict) -> str:
    """"gloo:all_reduce" -> "all_reduce": the op, whichever backend recorded it."""
    return str(entry.get("profiling_name", "?")).split(":")[-1]


def entry_pg(entry: dict) -> str:
    pg = entry.get("pg_id")
    if pg is None:
        pg = (entry.get("process_group") or ["?"])[0]
    return str(pg)


def signature(entry: dict) -> tuple:
    """What ranks must agree on to complete one collective."""
    sizes = tuple(tuple(s) for s in entry.get("input_sizes") or ())
    return op_name(entry), sizes, tuple(entry.get("input_dtypes") or ())


def describe_call(entry: dict) -> dict:
    return {"pg": entry_pg(entry), "seq": int(entry["collective_seq_id"]), "op": op_name(entry),
            "input_sizes": entry.get("input_sizes"), "dtypes": entry.get("input_dtypes")}


def collectives_by_seq(record: dict | None, pg: str) -> dict[int, dict]:
    """Collective entries (not point-to-point) of one process group, by sequence number."""
    out = {}
    for entry in (record or {}).get("entries") or ():
        if not entry.get("is_p2p") and entry_pg(entry) == pg and int(entry.get("collective_seq_id", 0)) > 0:
            out[int(entry["collective_seq_id"])] = entry
    return out


# ---------------------------------------------------------------- the rules

def behind(ranks: dict[int, RankEvidence]) -> Finding | None:
    """The ranks furthest behind in a process group, where their numbers are where they stopped."""
    groups = sorted({pg for ev in ranks.values() for pg in ev.progress}, key=_pg_order)
    for pg in groups:
        # Every rank belongs to the default group; of the others, only the ranks that know them.
        members = {r: ev for r, ev in ranks.items() if pg == DEFAULT_PG or pg in ev.progress}
        lead = max(ev.progress.get(pg, -1) for ev in members.values())
        trusted = {r: ev.progress.get(pg, -1) for r, ev in members.items() if ev.trusted}
        low = min(trusted.values(), default=lead)
        if lead <= 0 or low >= lead:
            continue
        if any(ev.progress.get(pg, -1) < low for r, ev in members.items() if r not in trusted):
            continue  # a rank whose number is only a lower bound may be further behind: no conclusion here
        # The laggards: a rank between them and the lead may only wait behind them.
        behind = sorted(r for r, progress in trusted.items() if progress == low)
        # Launches are asynchronous on accelerators: name the first collective the culprits never reached.
        missed = min(ranks[r].progress.get(pg, -1) for r in behind) + 1
        ahead = sorted(r for r, ev in members.items() if ev.progress.get(pg, -1) >= missed)
        call = _call_at(ranks, pg, missed) or {"pg": pg, "seq": missed, "op": None, "input_sizes": None,
                                                "dtypes": None}
        evidence = [f"rank {r}: last enqueued #{ranks[r].progress.get(pg, -1)}; {ranks[r].state()}" for r in behind]
        evidence += [f"rank {r}: enqueued #{ranks[r].progress.get(pg, -1)}; {ranks[r].state()}" for r in ahead]
        return Finding(behind, "behind",
                       f"rank(s) {_list(behind)} never arrived at {describe(call)}, which rank(s) {_list(ahead)} "
                       "entered", call, evidence)
    return None


def desync(ranks: dict[int, RankEvidence]) -> Finding | None:
    """Ranks whose records disagree at one sequence number of a group."""
    for pg, by_rank in _records_by_group(ranks):
        for seq in sorted({s for calls in by_rank.values() for s in calls}):
            votes = {r: signature(calls[seq]) for r, calls in by_rank.items() if seq in calls}
            if len(set(votes.values())) > 1:
                return _disagreement(by_rank, votes, pg, seq)
    return None


def novel_call(ranks: dict[int, RankEvidence]) -> Finding | None:
    """Only one side of a collective survives (a peer died mid-call without a record): a last call the rank never
    issued before is the suspect. Weaker than the order of deaths, which the judge asks first."""
    for pg, by_rank in _records_by_group(ranks):
        verdict = _novel_last_call(ranks, by_rank, pg)
        if verdict:
            return verdict
    return None


def _records_by_group(ranks: dict[int, RankEvidence]):
    """(group, {rank: {seq: entry}}) for every group in the dumped records, the default group first."""
    recorded = {r: ev for r, ev in ranks.items() if ev.record}
    groups = sorted({entry_pg(e) for ev in recorded.values() for e in ev.record.get("entries") or ()}, key=_pg_order)
    for pg in groups:
        yield pg, {r: collectives_by_seq(ev.record, pg) for r, ev in recorded.items()}


def _disagreement(by_rank: dict[int, dict[int, dict]], votes: dict[int, tuple], pg: str, seq: int) -> Finding:
    """Minority ranks are the culprits; without a majority, the ranks whose call is new to them."""
    counts: dict[tuple, list[int]] = {}
    for r, sig in votes.items():
        counts.setdefault(sig, []).append(r)
    ordered = sorted(counts.values(), key=len, reverse=True)
    if len(ordered[0]) > len(ordered[1]):
        culprits = sorted(r for group in ordered[1:] for r in group)
        how = "the majority of ranks issued something else"
    else:
        novel = sorted(r for r in votes if _is_new_to(by_rank[r], seq))
        culprits = novel if novel and len(novel) < len(votes) else sorted(votes)
        how = ("no majority; the call is new to rank(s) " + _list(novel) +
               " (never issued earlier in their record)") if culprits == novel else "no majority to tell them apart"
    evidence = [f"rank {r}: {describe(describe_call(by_rank[r][seq]))}" for r in sorted(votes)]
    return Finding(culprits, "desync",
                   f"ranks disagree at collective #{seq} of group {pg} ({how}); culprit rank(s) {_list(culprits)}",
                   describe_call(by_rank[culprits[0]][seq]), evidence)


def _novel_last_call(ranks: dict[int, RankEvidence], by_rank: dict[int, dict[int, dict]], pg: str) -> Finding | None:
    unrecorded = [r for r, ev in ranks.items() if not ev.record and not ev.stopped_by_launcher
                  and ev.phase not in ("finished", "failed")]
    if not unrecorded:
        return None
    suspects = [r for r, calls in by_rank.items() if calls and _is_new_to(calls, max(calls))]
    if not suspects:
        return None
    r = suspects[0]
    last = describe_call(by_rank[r][max(by_rank[r])])
    evidence = [f"rank {r}: {describe(last)}, never issued earlier in its record of "
                f"{len(by_rank[r]) - 1} collectives"]
    evidence += [f"rank {u}: no flight record; {ranks[u].state()}" for u in sorted(unrecorded)]
    return Finding(sorted(suspects), "desync",
                   f"rank(s) {_list(suspects)} issued {describe(last)}, unlike any earlier call; the record of "
                   f"rank(s) {_list(sorted(unrecorded))} is lost, so this is inferred from one side",
                   last, evidence)


def never_reached_init(ranks: dict[int, RankEvidence]) -> Finding | None:
    """Ranks without a process group while the others have one (then wait in their first collective) or wait in init."""
    in_init = sorted(r for r, ev in ranks.items() if ev.phase == "in-init")
    joined = sorted(r for r, ev in ranks.items() if r not in in_init and (ev.progress or ev.in_process_group))
    absent = sorted(r for r in ranks if r not in in_init and r not in joined and ranks[r].phase != "finished")
    if not absent or not (in_init or joined):
        return None
    waits_in = "init_process_group" if in_init else (ranks[joined[0]].torch_call or "their first collective")
    evidence = [f"rank {r}: {ranks[r].state()}" for r in absent]
    evidence += [f"rank {r}: {ranks[r].state()}" for r in in_init + joined]
    return Finding(absent, "never-reached-init",
                   f"rank(s) {_list(absent)} never reached init_process_group; rank(s) {_list(in_init + joined)} "
                   f"waited in {waits_in}",
                   init_call(), evidence)


def init_call() -> dict:
    return {"pg": None, "seq": None, "op": "init_process_group", "input_sizes": None, "dtypes": None}


# ---------------------------------------------------------------- torch's analyzer

def from_torch_analyzer(ranks: dict[int, RankEvidence]) -> tuple[Finding | None, dict]:
    """torch's own analyzer over the dumps; (None, why) when it is missing, fails or finds nothing."""
    recorded = {r: ev.record for r, ev in ranks.items() if ev.record and ev.record.get("entries")}
    if len(recorded) < 2:
        return None, {"tool": ANALYZER, "status": "not run", "why": "fewer than two ranks dumped a record"}
    try:
        with _quiet("Flight Recorder"):
            from torch.distributed.flight_recorder.components.builder import build_db
    except Exception as exc:  # some torch releases ship it pointing at a module the wheel lacks
        return None, {"tool": ANALYZER, "status": "unavailable", "error": f"{type(exc).__name__}: {exc}"}
    details = {f"rank{r}": {"host_name": f"rank{r}", "rank": r, "entries": copy.deepcopy(rec["entries"]),
                            "version": rec.get("version"), "pg_config": copy.deepcopy(rec.get("pg_config") or {})}
               for r, rec in recorded.items()}
    # build_db reads its options as attributes, as torch's own command line hands them over.
    args = SimpleNamespace(verbose=False, just_print_entries=False, allow_incomplete_ranks=True,
                              mismatch_cap=10, selected_ranks=None, pg_filters=None, print_stack_trace=False)
    try:
        with _quiet("Flight Recorder"):
            db = build_db(details, args, str(next(iter(recorded.values())).get("version")))
    except Exception as exc:  # e.g. KeyError on gloo dumps whose pg_config name is empty
        return None, {"tool": ANALYZER, "status": "failed", "error": f"{type(exc).__name__}: {exc}"}
    failing = [c for c in db.collectives if not c.pass_check or c.missing_ranks]
    if not failing:
        return None, {"tool": ANALYZER, "status": "no finding"}
    return _verdict_from_analyzer(failing[0], ranks), {"tool": ANALYZER, "status": "used"}


def _verdict_from_analyzer(found, ranks: dict[int, RankEvidence]) -> Finding | None:
    pg = str(found.pg_desc).split(":")[0]
    seq = int(found.collective_seq_id)
    call = {"pg": pg, "seq": seq, "op": str(found.collective_name).split(":")[-1],
            "input_sizes": found.input_sizes, "dtypes": None}
    if found.missing_ranks:
        missing = sorted(int(r) for r in found.missing_ranks)
        return Finding(missing, "behind", f"torch's analyzer: rank(s) {_list(missing)} did not join {describe(call)}",
                       call, [f"rank {r}: {ranks[r].state()}" for r in missing if r in ranks])
    # A mismatch: torch's analyzer blames whichever rank it compared against first; ddplab's vote decides.
    by_rank = {r: collectives_by_seq(ev.record, pg) for r, ev in ranks.items() if ev.record}
    votes = {r: signature(calls[seq]) for r, calls in by_rank.items() if seq in calls}
    if len(set(votes.values())) > 1:
        verdict = _disagreement(by_rank, votes, pg, seq)
        verdict.reason = f"torch's analyzer: collective #{seq} mismatches; {verdict.reason}"
        return verdict
    return None


@contextlib.contextmanager
def _quiet(name: str):
    """Drop the analyzer's log records (it resets its logger's level on import); ddplab reports findings itself."""
    logger, drop = logging.getLogger(name), lambda record: False
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


# ---------------------------------------------------------------- helpers

def _is_new_to(calls: dict[int, dict], seq: int) -> bool:
    """The call at ``seq`` differs from every earlier call in this record (which has some)."""
    sig = signature(calls[seq])
    earlier = [signature(e) for s, e in calls.items() if s < seq]
    return bool(earlier) and sig not in earlier


def _call_at(ranks: dict[int, RankEvidence], pg: str, seq: int) -> dict | None:
    for ev in ranks.values():
        entry = collectives_by_seq(ev.record, pg).get(seq)
        if entry:
            return describe_call(entry)
    return None


def last_call(ev: RankEvidence) -> dict | None:
    calls = [e for e in (ev.record or {}).get("entries") or () if not e.get("is_p2p")]
    return describe_call(calls[-1]) if calls else None


def describe(call: dict) -> str:
    """all_reduce #4 (group 0) ...; or "collective #4 of group 0" where the op is not known."""
    if not call.get("op"):
        return f"collective #{call.get('seq')} of group {call.get('pg')}"
    sizes = f" input sizes {call['input_sizes']}" if call.get("input_sizes") is not None else ""
    dtypes = f" {call['dtypes']}" if call.get("dtypes") else ""
    return f"{call.get('op')} #{call.get('seq')} (group {call.get('pg')}){sizes}{dtypes}"


def _pg_order(pg: str):
    return (0, int(pg)) if str(pg).isdigit() else (1, str(pg))


def _list(ranks) -> str:
    return ", ".join(str(r) for r in ranks)
