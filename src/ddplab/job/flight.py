"""Flight records in, culprit ranks and the collective out.

Inputs per rank (``RankEvidence``): its last status (beacon heartbeat: where the main thread
is, the flight recorder's per-group status), its full flight record when it dumped one, its
uncaught exception, and how its process ended. ``name_culprits`` applies, in order:

  1. never-started       ranks that never wrote a status
  2. (torch's analyzer)   build_db over the dumps, where it works: missing ranks, or the
                          first mismatching collective (docs/flight-recorder.md says where
                          it does not: torch 2.9, and gloo dumps with an empty group name)
  3. behind              the ranks with the lowest last enqueued collective while others are
                          ahead: they never arrived at the collective the others wait in
  4. desync              ranks that issued different ops or sizes at one sequence number
  5. never-reached-init  ranks outside init_process_group while the others wait in it
  6. raised / died       the first rank that raised, or that a signal ended on its own
  7. frozen              ranks whose heartbeat stopped (paused, or holding the GIL)
  8. stuck-together      every rank inside the same collective: nothing tells them apart

A number is only held against a rank when it is where the rank stopped: it finished or
raised (its last status is final), or it answered the dump request (it was stuck there).
A rank that a signal ended has only an older heartbeat: a lower bound, never evidence.
"""

from __future__ import annotations

import copy
import json
import logging
import pickle
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace

from ..records.launch import Analyzer, CollectiveCall, Culprit

ANALYZER = "torch.distributed.flight_recorder build_db"
DEFAULT_PG = "0"  # the recorder numbers groups in creation order: init_process_group's comes first
FINAL_PHASES = ("finished", "raised")


# ---------------------------------------------------------------- flight records

def load_record(path: Path) -> dict | None:
    """A flight-recorder dump: JSON (ddplab's and torch's *_json dumps) or pickle (torch's
    default dump format). These files come from this job's own ranks."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        return json.loads(data)
    except ValueError:
        pass
    try:
        record = pickle.loads(data)
    except Exception:
        return None
    return record if isinstance(record, dict) else None


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


def progress_of(record: dict | None) -> dict[str, int]:
    """{pg: last enqueued collective} from a record's per-group status."""
    out = {}
    for pg, status in ((record or {}).get("pg_status") or {}).items():
        out[str(pg)] = int(status.get("last_enqueued_collective", -1))
    return out


# ---------------------------------------------------------------- evidence

@dataclass
class RankEvidence:
    rank: int
    status: dict | None = None  # the last status its beacon wrote
    record: dict | None = None  # its full flight record, when it dumped one
    error: dict | None = None  # its uncaught exception: type, message, traceback
    ended_by: str | None = None  # "exit 0", "exit 1", "SIGABRT", ... as the launcher saw it
    stopped_by_launcher: bool = False  # ended by ddplab's or torchrun's teardown, not on its own
    answered: bool = False  # answered the last dump request: its numbers are where it was stuck

    @property
    def phase(self) -> str | None:
        return (self.status or {}).get("phase")

    @property
    def trusted(self) -> bool:
        """Its progress is where it stopped, not a lower bound."""
        return self.answered or self.phase in FINAL_PHASES

    @property
    def progress(self) -> dict[str, int]:
        """{pg: last enqueued}: the highest seen in its dump and its heartbeats (it only grows)."""
        merged = progress_of(self.record)
        for pg, s in ((self.status or {}).get("progress") or {}).items():
            merged[pg] = max(merged.get(pg, -1), int(s["enqueued"]))
        return merged

    @property
    def torch_call(self) -> str | None:
        return ((self.status or {}).get("where") or {}).get("torch_call")

    def location(self, depth: int = 3) -> str:
        frames = ((self.status or {}).get("where") or {}).get("frames") or []
        return " <- ".join(frames[:depth]) if frames else "unknown"

    def state(self) -> str:
        """What this rank was doing, in words, for a culprit's reason."""
        if self.error:
            first_line = (str(self.error["message"]).strip().splitlines() or [""])[0]
            return f"raised {self.error['type']}: {first_line[:160]}"
        if self.phase == "finished":
            return "finished its script and exited"
        if self.ended_by and not self.stopped_by_launcher:
            return f"ended by {self.ended_by}"
        if self.torch_call:
            call_site = ((self.status or {}).get("where") or {}).get("call_site") or self.location(1)
            return f"waiting in {self.torch_call}, called at {call_site}"
        return f"main thread in user code at {self.location()}"


@dataclass
class Verdict:
    ranks: list[int]
    kind: str
    reason: str
    collective: dict | None = None
    evidence: list[str] = field(default_factory=list)
    analyzer: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    def to_record(self) -> Culprit:
        """The verdict as the job's report keeps it (the call and the analyzer's status are this module's dicts)."""
        call, analyzer = self.collective, self.analyzer
        return Culprit(ranks=list(self.ranks), kind=self.kind, reason=self.reason,
                       collective=None if call is None else CollectiveCall(
                           pg=call.get("pg"), seq=call.get("seq"), op=call.get("op"),
                           input_sizes=call.get("input_sizes"), dtypes=call.get("dtypes")),
                       evidence=list(self.evidence),
                       analyzer=Analyzer(tool=analyzer.get("tool", ANALYZER), status=analyzer.get("status", "not run"),
                                         why=analyzer.get("why"), error=analyzer.get("error")))


# ---------------------------------------------------------------- the rules

def name_culprits(ranks: dict[int, RankEvidence], expected: list[int], use_analyzer: bool = True,
                  frozen_after_s: float = 3.0, now: float | None = None) -> Verdict:
    """The ranks that held the others up, why, and the collective they are behind on."""
    analyzer_status: dict = {"tool": ANALYZER, "status": "not run"}
    verdict = _never_started(ranks, expected)
    if verdict is None and use_analyzer:
        verdict, analyzer_status = _from_torch_analyzer(ranks)
    verdict = verdict or _behind(ranks) or _desync(ranks) or _never_reached_init(ranks) \
        or _raised_or_died(ranks) or _frozen(ranks, frozen_after_s, now) or _stuck_together(ranks)
    verdict.analyzer = analyzer_status
    return verdict


def _never_started(ranks: dict[int, RankEvidence], expected: list[int]) -> Verdict | None:
    missing = [r for r in expected if r not in ranks or ranks[r].status is None]
    if not missing:
        return None
    return Verdict(missing, "never-started", f"rank(s) {_list(missing)} never started (no status written)")


def _behind(ranks: dict[int, RankEvidence]) -> Verdict | None:
    groups = sorted({pg for ev in ranks.values() for pg in ev.progress}, key=_pg_order)
    for pg in groups:
        # Every rank belongs to the default group; of the others, only the ranks that know them.
        members = {r: ev for r, ev in ranks.items() if pg == DEFAULT_PG or pg in ev.progress}
        lead = max(ev.progress.get(pg, -1) for ev in members.values())
        behind = sorted(r for r, ev in members.items() if ev.trusted and ev.progress.get(pg, -1) < lead)
        if lead <= 0 or not behind:
            continue
        # Launches are asynchronous on accelerators: the ranks ahead may have enqueued several
        # collectives past the one the culprits never reached. Name that first one.
        missed = min(ranks[r].progress.get(pg, -1) for r in behind) + 1
        ahead = sorted(r for r, ev in members.items() if ev.progress.get(pg, -1) >= missed)
        call = _call_at(ranks, pg, missed)
        what = _describe(call) if call else f"collective #{missed} of group {pg}"
        evidence = [f"rank {r}: last enqueued #{ranks[r].progress.get(pg, -1)}; {ranks[r].state()}" for r in behind]
        evidence += [f"rank {r}: enqueued #{ranks[r].progress.get(pg, -1)}; {ranks[r].state()}" for r in ahead]
        return Verdict(behind, "behind",
                       f"rank(s) {_list(behind)} never arrived at {what}, which rank(s) {_list(ahead)} entered",
                       call or {"pg": pg, "seq": missed, "op": None, "input_sizes": None, "dtypes": None}, evidence)
    return None


def _desync(ranks: dict[int, RankEvidence]) -> Verdict | None:
    recorded = {r: ev for r, ev in ranks.items() if ev.record}
    groups = sorted({entry_pg(e) for ev in recorded.values() for e in ev.record.get("entries") or ()}, key=_pg_order)
    for pg in groups:
        by_rank = {r: collectives_by_seq(ev.record, pg) for r, ev in recorded.items()}
        for seq in sorted({s for calls in by_rank.values() for s in calls}):
            votes = {r: signature(calls[seq]) for r, calls in by_rank.items() if seq in calls}
            if len(set(votes.values())) > 1:
                return _disagreement(by_rank, votes, pg, seq)
        verdict = _novel_last_call(ranks, by_rank, pg)
        if verdict:
            return verdict
    return None


def _disagreement(by_rank: dict[int, dict[int, dict]], votes: dict[int, tuple], pg: str, seq: int) -> Verdict:
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
    evidence = [f"rank {r}: {_describe(describe_call(by_rank[r][seq]))}" for r in sorted(votes)]
    return Verdict(culprits, "desync",
                   f"ranks disagree at collective #{seq} of group {pg} ({how}); culprit rank(s) {_list(culprits)}",
                   describe_call(by_rank[culprits[0]][seq]), evidence)


def _novel_last_call(ranks: dict[int, RankEvidence], by_rank: dict[int, dict[int, dict]], pg: str) -> Verdict | None:
    """Only one side of a collective survives (a peer died mid-call, e.g. gloo aborting on a
    size it did not expect): a last call that the rank never issued before is the suspect."""
    unrecorded = [r for r, ev in ranks.items() if not ev.record and not ev.stopped_by_launcher
                  and ev.phase not in FINAL_PHASES]
    if not unrecorded:
        return None
    suspects = []
    for r, calls in by_rank.items():
        if calls and _is_new_to(calls, max(calls)):
            suspects.append(r)
    if not suspects:
        return None
    r = suspects[0]
    last = describe_call(by_rank[r][max(by_rank[r])])
    evidence = [f"rank {r}: {_describe(last)}, never issued earlier in its record of "
                f"{len(by_rank[r]) - 1} collectives"]
    evidence += [f"rank {u}: no flight record; {ranks[u].state()}" for u in sorted(unrecorded)]
    return Verdict(sorted(suspects), "desync",
                   f"rank(s) {_list(suspects)} issued {_describe(last)}, unlike any earlier call; the record of "
                   f"rank(s) {_list(sorted(unrecorded))} is lost, so this is inferred from one side",
                   last, evidence)


def _never_reached_init(ranks: dict[int, RankEvidence]) -> Verdict | None:
    """Ranks without a process group while the others have one or wait in init_process_group
    (with a lazily built communicator, the others wait in their first collective instead)."""
    in_init = sorted(r for r, ev in ranks.items() if ev.torch_call == "init_process_group")
    joined = sorted(r for r, ev in ranks.items() if r not in in_init and _joined(ev))
    absent = sorted(r for r in ranks if r not in in_init and r not in joined and ranks[r].phase != "finished")
    if not absent or not (in_init or joined):
        return None
    waits_in = "init_process_group" if in_init else (ranks[joined[0]].torch_call or "their first collective")
    evidence = [f"rank {r}: {ranks[r].state()}" for r in absent]
    evidence += [f"rank {r}: {ranks[r].state()}" for r in in_init + joined]
    return Verdict(absent, "never-reached-init",
                   f"rank(s) {_list(absent)} never reached init_process_group; rank(s) {_list(in_init + joined)} "
                   f"waited in {waits_in}",
                   {"pg": None, "seq": None, "op": "init_process_group", "input_sizes": None, "dtypes": None},
                   evidence)


def _joined(ev: RankEvidence) -> bool:
    return bool(ev.progress) or bool((ev.status or {}).get("in_process_group"))


def _raised_or_died(ranks: dict[int, RankEvidence]) -> Verdict | None:
    raised = sorted((ev.error["at"], r) for r, ev in ranks.items() if ev.error)
    if raised:
        r = raised[0][1]
        return Verdict([r], "raised", f"rank {r} {ranks[r].state()}", _last_call(ranks[r]),
                       [f"rank {q}: {ranks[q].state()}" for q in sorted(ranks)])
    died = sorted(r for r, ev in ranks.items() if ev.ended_by and ev.ended_by != "exit 0"
                  and not ev.stopped_by_launcher)
    if died:
        return Verdict(died, "died", f"rank(s) {_list(died)} ended on their own: "
                       + "; ".join(f"rank {r} by {ranks[r].ended_by}" for r in died), None,
                       [f"rank {q}: {ranks[q].state()}" for q in sorted(ranks)])
    return None


def _frozen(ranks: dict[int, RankEvidence], after_s: float, now: float | None) -> Verdict | None:
    if now is None:
        return None
    frozen = sorted(r for r, ev in ranks.items() if ev.status and ev.status.get("heartbeat")
                    and ev.phase == "running" and not ev.answered and now - ev.status["heartbeat"] > after_s)
    if not frozen:
        return None
    return Verdict(frozen, "frozen", f"rank(s) {_list(frozen)} stopped writing heartbeats for more than "
                   f"{after_s:.0f} s (process paused, or something holds the GIL); see their fatal.txt stacks")


def _stuck_together(ranks: dict[int, RankEvidence]) -> Verdict:
    calls = {ev.torch_call for ev in ranks.values()}
    where = ", ".join(sorted(c or "user code" for c in calls))
    return Verdict([], "stuck-together", f"no rank stands out: all are in {where} at the same point")


# ---------------------------------------------------------------- torch's analyzer

def _from_torch_analyzer(ranks: dict[int, RankEvidence]) -> tuple[Verdict | None, dict]:
    """torch's own analyzer over the dumps; (None, why) when it is missing, fails or finds nothing."""
    recorded = {r: ev.record for r, ev in ranks.items() if ev.record and ev.record.get("entries")}
    if len(recorded) < 2:
        return None, {"tool": ANALYZER, "status": "not run", "why": "fewer than two ranks dumped a record"}
    try:
        with _quiet("Flight Recorder"):
            from torch.distributed.flight_recorder.components.builder import build_db
    except Exception as exc:  # torch 2.9 ships it pointing at a module the wheel lacks
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
    except Exception as exc:  # e.g. KeyError on gloo dumps whose pg_config name is empty (torch 2.13)
        return None, {"tool": ANALYZER, "status": "failed", "error": f"{type(exc).__name__}: {exc}"}
    failing = [c for c in db.collectives if not c.pass_check or c.missing_ranks]
    if not failing:
        return None, {"tool": ANALYZER, "status": "no finding"}
    return _verdict_from_analyzer(failing[0], ranks), {"tool": ANALYZER, "status": "used"}


def _verdict_from_analyzer(found, ranks: dict[int, RankEvidence]) -> Verdict | None:
    pg = str(found.pg_desc).split(":")[0]
    seq = int(found.collective_seq_id)
    call = {"pg": pg, "seq": seq, "op": str(found.collective_name).split(":")[-1],
            "input_sizes": found.input_sizes, "dtypes": None}
    if found.missing_ranks:
        missing = sorted(int(r) for r in found.missing_ranks)
        return Verdict(missing, "behind", f"torch's analyzer: rank(s) {_list(missing)} did not join {_describe(call)}",
                       call, [f"rank {r}: {ranks[r].state()}" for r in missing if r in ranks])
    # A mismatch: torch's analyzer blames whichever rank it compared against first, so
    # who is in the wrong is decided by ddplab's vote at the sequence number it found.
    by_rank = {r: collectives_by_seq(ev.record, pg) for r, ev in ranks.items() if ev.record}
    votes = {r: signature(calls[seq]) for r, calls in by_rank.items() if seq in calls}
    if len(set(votes.values())) > 1:
        verdict = _disagreement(by_rank, votes, pg, seq)
        verdict.reason = f"torch's analyzer: collective #{seq} mismatches; {verdict.reason}"
        return verdict
    return None


class _quiet:
    """torch's analyzer logs every finding to stderr (and resets its logger's level when it
    is imported); ddplab reports findings itself, so a filter drops the analyzer's records."""

    def __init__(self, name: str):
        self.logger = logging.getLogger(name)

    def __enter__(self):
        self.logger.addFilter(_drop)

    def __exit__(self, *exc):
        self.logger.removeFilter(_drop)


def _drop(record: logging.LogRecord) -> bool:
    return False


# ---------------------------------------------------------------- helpers

def _is_new_to(calls: dict[int, dict], seq: int) -> bool:
    """The call at ``seq`` differs from every earlier call of the same op in this record."""
    sig = signature(calls[seq])
    earlier = [signature(e) for s, e in calls.items() if s < seq and op_name(e) == sig[0]]
    return bool(earlier) and sig not in earlier


def _call_at(ranks: dict[int, RankEvidence], pg: str, seq: int) -> dict | None:
    for ev in ranks.values():
        entry = collectives_by_seq(ev.record, pg).get(seq)
        if entry:
            return describe_call(entry)
    return None


def _last_call(ev: RankEvidence) -> dict | None:
    calls = [e for e in (ev.record or {}).get("entries") or () if not e.get("is_p2p")]
    return describe_call(calls[-1]) if calls else None


def _describe(call: dict) -> str:
    sizes = f" input sizes {call['input_sizes']}" if call.get("input_sizes") is not None else ""
    dtypes = f" {call['dtypes']}" if call.get("dtypes") else ""
    return f"{call.get('op')} #{call.get('seq')} (group {call.get('pg')}){sizes}{dtypes}"


def _pg_order(pg: str):
    return (0, int(pg)) if str(pg).isdigit() else (1, str(pg))


def _list(ranks) -> str:
    return ", ".join(str(r) for r in ranks)
