"""What report.html draws for a `ddplab launch` job (``launch_figures``), display-free, and its collectives as a
timeline, from the flight records the report names (``ranks[].flight_record``): ``trace_events`` (a Chrome
trace-event document for Perfetto: a process per rank, a thread per process group, each collective an "X" event, the
hang an instant event; microseconds from the first entry) and ``lane_timeline`` (report.html's last entries per rank,
the culprit's last and the stuck ones marked).

Whether an entry completed is what the rank's own record says (NCCL's entries carry times, gloo's stay "scheduled"):
its state, else its group's ``last_completed_collective`` in ``pg_status``, else ``retired``. A collective the rank
was waiting in when the hang was declared is drawn waiting up to the declaration, even where a later dump has it
completed. An entry ends at its completion time, else (completed) the next entry's enqueue, else (pending) the dump
or the declaration; each event says which.

A report moved elsewhere finds its files relative to its own directory. Flight records are read as JSON only, never
unpickled: a report's directory may come from anywhere.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, replace
from pathlib import Path

from ..records.figures import Lane, LaneTimeline, LineChart, Mark, Span
from ..records.launch import LaunchRecord

MAX_RECORD_BYTES = 64 * 2 ** 20  # a 2000-entry record is well under 1 MiB
INLINE_ENTRIES = 10  # per rank on the page; the trace file has them all
DONE, PENDING, CULPRIT_LAST, STUCK = "done", "pending", "culprit-last", "stuck"


@dataclass(frozen=True)
class Entry:
    rank: int
    pg: str
    seq: int
    op: str
    p2p: bool
    start_ns: int
    end_ns: int
    how: str  # how the end is known
    pending: bool
    raw: dict  # the recorder's own fields, for the trace's args


def resolve(path: str | None, job_dir: str, base_dir: Path | None) -> Path | None:
    """The file as the report names it, or, where that is missing, at the same place under ``base_dir``
    (the report's own directory): ranks/0/flight.json of /tmp/job is base_dir/ranks/0/flight.json."""
    if not path:
        return None
    named = Path(path)
    if named.is_file():
        return named
    if base_dir is None:
        return None
    moved = base_dir / (named.relative_to(job_dir) if named.is_relative_to(job_dir) else named.name)
    return moved if moved.is_file() else None


def read_record(path: Path | None) -> dict | None:
    """A flight record dumped as JSON, or None (missing, too large, not JSON, not an object)."""
    try:
        if path is None or path.stat().st_size > MAX_RECORD_BYTES:
            return None
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def entries_of(record: LaunchRecord, base_dir: Path | None) -> tuple[dict[int, list[Entry]], dict[int, float]]:
    """Each rank's entries in order of enqueue, and when each rank's record was dumped (wall seconds)."""
    by_rank: dict[int, list[Entry]] = {}
    dumped: dict[int, float] = {}
    for rank in record.ranks:
        data = read_record(resolve(rank.flight_record, record.job_dir, base_dir))
        if data is None:
            continue
        if isinstance(data.get("dumped_at"), (int, float)):
            dumped[rank.rank] = float(data["dumped_at"])
        by_rank[rank.rank] = _entries(rank.rank, data, dumped.get(rank.rank), record)
    return by_rank, dumped


def _entries(rank: int, data: dict, dumped_at: float | None, record: LaunchRecord) -> list[Entry]:
    raw = [e for e in data.get("entries") or () if isinstance(e, dict) and _ns(e.get("time_created_ns"))]
    raw.sort(key=lambda e: _ns(e.get("time_created_ns")))
    stop = dumped_at or (record.hang.declared_at if record.hang else None) or record.detected_at
    last_completed = _last_completed(data)
    waited = _waited_at_the_hang(rank, record)
    out = []
    for i, e in enumerate(raw):
        start = _ns(e.get("time_created_ns"))
        completed = _ns(e.get("time_discovered_completed_ns"))
        pg = str(e.get("pg_id", (e.get("process_group") or ["0"])[0]))
        p2p = bool(e.get("is_p2p"))
        seq = int(e.get("collective_seq_id") or e.get("p2p_seq_id") or 0)
        done = _completed(e, None if p2p else last_completed.get(pg), seq)
        if not p2p and pg in waited and waited[pg][0] < seq <= waited[pg][1] and done:
            done, end = False, int(record.hang.declared_at * 1e9)
            how = "waiting when the hang was declared (the record, dumped later, has it completed after that)"
        elif completed and done:
            end, how = completed, "completed (the recorder's completion time)"
        elif done and i + 1 < len(raw):
            end, how = _ns(raw[i + 1].get("time_created_ns")), ("completed; no completion time recorded, drawn "
                                                                "up to the next collective's enqueue")
        elif done:
            end, how = start, "completed; no completion time recorded"
        else:
            end = int(stop * 1e9) if stop else start
            how = "still pending when the record was dumped" if dumped_at else "still pending"
        out.append(Entry(rank, pg, seq, str(e.get("profiling_name", "?")).split(":")[-1], p2p, start,
                         max(end, start), how, not done, e))
    return out


def _completed(entry: dict, last_completed: int | None, seq: int) -> bool:
    """What the rank's own record says of one entry: its state, else its group's completed count (the backend's,
    where the record has one for a collective's group: gloo's entries stay "scheduled"), else ``retired``."""
    if entry.get("state") == "completed":
        return True
    if last_completed is not None:
        return seq <= last_completed
    return bool(entry.get("retired"))


def _last_completed(data: dict) -> dict[str, int]:
    """{process group: its last completed collective} from the record's pg_status, where it says."""
    groups = data.get("pg_status")
    out = {}
    for pg, status in groups.items() if isinstance(groups, dict) else ():
        try:
            out[str(pg)] = int(status["last_completed_collective"])
        except (TypeError, KeyError, ValueError):
            continue
    return out


def _waited_at_the_hang(rank: int, record: LaunchRecord) -> dict[str, tuple[int, int]]:
    """{process group: (completed, enqueued)} where the rank's status, when the hang was declared, had collectives
    enqueued and not completed: it was waiting in those."""
    state = record.hang.snapshot.get(rank) if record.hang else None
    progress = (state.progress if state else None) or {}
    return {str(pg): (p.completed, p.enqueued) for pg, p in progress.items() if p.enqueued > p.completed}


def _ns(value) -> int:
    return int(value) if isinstance(value, (int, float)) and value > 0 else 0


def _state(entry: Entry, last: Entry | None, culprits: set[int]) -> str:
    if entry.rank in culprits and entry is last:
        return CULPRIT_LAST
    if entry.pending:
        return STUCK if entry.rank not in culprits else PENDING
    return DONE


def _origin(by_rank: dict[int, list[Entry]]) -> int | None:
    return min((e.start_ns for entries in by_rank.values() for e in entries), default=None)


def launcher_moments(record: LaunchRecord) -> list[tuple[str, float, str]]:
    """(label, wall seconds, kind) of what the launcher saw: the last progress and the hang, or the failure."""
    if record.hang:
        return [("last progress", record.hang.last_progress_at, "event"),
                ("hang declared", record.hang.declared_at, "detected")]
    return [("failure seen", record.detected_at, "detected")] if record.detected_at else []


def launch_figures(record: LaunchRecord, stage: str, base_dir: Path | None, trace_name: str) -> list:
    """The job's figures: the hang timeline, the culprit in words, then the record's tables and its charts with the
    launcher's moments marked, where the sampler's series says when it started (``started_at``)."""
    marks = moments(record)
    own = [replace(f, marks=[*f.marks, *marks]) if isinstance(f, LineChart) and f.x_label == "time since the launch"
           else f for f in record.figures(stage) if f.id != "launch-culprit"]
    timeline = lane_timeline(record, base_dir, trace_name)
    return ([timeline] if timeline else []) + [record.culprit_table(stage)] + own


def moments(record: LaunchRecord) -> list[Mark]:
    """The launcher's moments in seconds of the sampler's series, where the series says when it started."""
    started = getattr(record.timeseries, "started_at", None) if record.timeseries else None
    if not isinstance(started, (int, float)):
        return []
    return [Mark(label, at - started, kind) for label, at, kind in launcher_moments(record)]


def lane_timeline(record: LaunchRecord, base_dir: Path | None, trace_name: str) -> LaneTimeline | None:
    """The page's drawing of the job's last collectives, or None when no rank left a record with an entry (a job
    stuck before its first collective dumps records that hold none)."""
    by_rank, _ = entries_of(record, base_dir)
    if not any(by_rank.values()):
        return None
    culprits = set(record.culprit.ranks) if record.culprit else set()
    shown = {rank: entries[-INLINE_ENTRIES:] for rank, entries in by_rank.items()}
    origin = _origin(shown)
    lanes = []
    for rank in sorted(r.rank for r in record.ranks):
        who = f"rank {rank}" + (" (culprit)" if rank in culprits else "")
        entries = shown.get(rank)
        if not entries:
            ended = next((r.ended_by for r in record.ranks if r.rank == rank), None)
            lanes.append(Lane(who, [], "no flight record" + (f" (the rank ended: {ended})" if ended else "")))
            continue
        last = entries[-1]
        spans = [Span(f"{e.op} #{e.seq}", (e.start_ns - origin) / 1e9, (e.end_ns - origin) / 1e9, e.how,
                      _state(e, last, culprits)) for e in entries]
        earlier = len(by_rank[rank]) - len(entries)
        lanes.append(Lane(who, spans, _lane_note(last) + (f"; {earlier} earlier in the trace file" if earlier else "")))
    marks = [Mark(label, at - origin / 1e9, kind) for label, at, kind in launcher_moments(record) if at]
    headline = (f"Culprit: rank {', '.join(str(r) for r in sorted(culprits))}. {record.culprit.reason}"
                if record.culprit else f"No culprit named; the job {record.outcome}.")
    caption = (f"Each rank's last flight-recorder entries, from enqueue to completion (red: the culprit's last "
               f"entry; orange: entries the other ranks were stuck in; blue: completed). {_backend_note(by_rank)}")
    return LaneTimeline("hang-timeline", "Collectives per rank (flight recorder)", caption, lanes, marks, headline,
                        trace_name)


def _lane_note(last: Entry) -> str:
    if last.pending:
        return f"waiting in {last.op} #{last.seq} for {(last.end_ns - last.start_ns) / 1e9:.1f} s"
    return f"last: {last.op} #{last.seq}, completed"


def _backend_note(by_rank: dict[int, list[Entry]]) -> str:
    timed = any(_ns(e.raw.get("time_discovered_completed_ns")) for entries in by_rank.values() for e in entries)
    return "" if timed else ("This recorder kept no start or completion times (gloo): a completed entry is drawn up "
                             "to the next one's enqueue.")


def trace_events(record: LaunchRecord, base_dir: Path | None, version: str) -> dict | None:
    """The Chrome trace-event document of every rank's entries, or None when no rank left a readable record."""
    by_rank, dumped = entries_of(record, base_dir)
    origin = _origin(by_rank)
    if origin is None:
        return None
    culprits = set(record.culprit.ranks) if record.culprit else set()
    events: list[dict] = []
    for rank in sorted(by_rank):
        entries = by_rank[rank]
        name = f"rank {rank}" + (" (culprit)" if rank in culprits else "")
        events.append({"name": "process_name", "ph": "M", "pid": rank, "tid": 0, "args": {"name": name}})
        events.append({"name": "process_sort_index", "ph": "M", "pid": rank, "tid": 0, "args": {"sort_index": rank}})
        for pg in sorted({e.pg for e in entries}):
            events.append({"name": "thread_name", "ph": "M", "pid": rank, "tid": _tid(pg),
                           "args": {"name": f"process group {pg}"}})
        last = entries[-1] if entries else None
        for e in entries:
            events.append({
                "name": f"{e.op} #{e.seq}", "cat": "p2p" if e.p2p else "collective", "ph": "X",
                "ts": (e.start_ns - origin) / 1e3, "dur": (e.end_ns - e.start_ns) / 1e3, "pid": rank,
                "tid": _tid(e.pg), "args": {
                    "seq": e.seq, "highlight": _state(e, last, culprits), "completed": not e.pending, "end": e.how,
                    "state": e.raw.get("state"), "retired": e.raw.get("retired"),
                    "input_sizes": e.raw.get("input_sizes"), "input_dtypes": e.raw.get("input_dtypes"),
                    "enqueued_ns": e.start_ns, "started_ns": _ns(e.raw.get("time_discovered_started_ns")) or None,
                    "completed_ns": _ns(e.raw.get("time_discovered_completed_ns")) or None}})
        if rank in dumped:
            events.append(_instant("record dumped", dumped[rank], origin, rank))
    for label, at, _ in launcher_moments(record):
        if at:
            events.append(_instant(label, at, origin, None))
    other = {"tool": f"ddplab {version}", "run_id": record.run_id, "outcome": record.outcome,
             "origin_unix_ns": origin, "culprit_ranks": sorted(culprits),
             "culprit_reason": record.culprit.reason if record.culprit else None}
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}


def _instant(label: str, wall_s: float, origin_ns: int, rank: int | None) -> dict:
    return {"name": label, "ph": "i", "ts": (wall_s * 1e9 - origin_ns) / 1e3, "pid": rank if rank is not None else 0,
            "tid": 0, "s": "p" if rank is not None else "g"}


def _tid(pg: str) -> int:
    return int(pg) if pg.isdigit() else zlib.crc32(pg.encode()) % 10_000 + 1000  # a stable number per group name
