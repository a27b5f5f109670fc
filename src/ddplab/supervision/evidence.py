"""What each rank of a job left behind, gathered once the job ended, typed, for the judge: its last status, its
flight record, its uncaught exception, how its process ended, and whether it answered the last dump request.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import re
from dataclasses import dataclass
from pathlib import Path

from ..platform import flight_recorder
from ..records.codec import RecordError, from_json
from ..records.supervision import RankEnd, RankError, RankState
from ..basics.rundir import RunDir
from .states import END_PHASES, phase_of


_PACKAGE_DIRS = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")


@dataclass
class RankEvidence:
    rank: int
    status: RankState | None = None  # the last status its beacon wrote
    record: dict | None = None  # its full flight record, when it dumped one
    error: RankError | None = None  # its uncaught exception: type, message, traceback, when
    end: RankEnd | None = None  # how and when its process ended, as the launcher saw it
    answered: bool = False  # answered the last dump request: its numbers are where it was stuck
    # where a SIGABRT came from (``abort_site``): "own code", "library" (NCCL's watchdog, gloo's transport), None
    abort: str | None = None

    @property
    def phase(self) -> str | None:
        return phase_of(self.status) if self.status else None

    @property
    def stopped_by_launcher(self) -> bool:
        return bool(self.end and self.end.by_launcher)

    @property
    def torch_call(self) -> str | None:
        return self.status.torch_call if self.status else None

    @property
    def in_process_group(self) -> bool | None:
        return self.status.in_process_group if self.status else None

    @property
    def trusted(self) -> bool:
        """Its progress is where it stopped, not a lower bound."""
        return self.answered or (self.status is not None and self.status.phase in END_PHASES)

    @property
    def progress(self) -> dict[str, int]:
        """{pg: last enqueued}: the highest seen in its dump (its status, and its entries: under NCCL's blocking
        wait torch keeps no status) and its heartbeats (it only grows)."""
        merged = {str(pg): int(s.get("last_enqueued_collective", -1))
                  for pg, s in ((self.record or {}).get("pg_status") or {}).items()}
        for pg, seqs in flight_recorder.enqueued_by_group((self.record or {}).get("entries") or []).items():
            merged[pg] = max(merged.get(pg, -1), *seqs)
        for pg, p in ((self.status.progress if self.status else None) or {}).items():
            merged[pg] = max(merged.get(pg, -1), p.enqueued)
        return merged

    @property
    def error_text(self) -> str | None:
        """Its error in words: its error file, or (a rank on another machine) what its status said."""
        if self.error:
            return f"{self.error.type}: {self.error.message}"
        return self.status.error if self.status else None

    @property
    def error_at(self) -> float | None:
        if self.error:
            return self.error.at
        return self.status.failed_at if self.status else None

    def location(self, depth: int = 3) -> str:
        frames = (self.status.where.frames if self.status and self.status.where else None) or []
        return " <- ".join(frames[:depth]) if frames else "unknown"

    def user_line(self) -> str:
        """The innermost frame of the rank's own code, not an installed package's (torch, Lightning...)."""
        frames = (self.status.where.frames if self.status and self.status.where else None) or []
        own = [f for f in frames if not any(d in f for d in _PACKAGE_DIRS)]
        return (own or frames or ["unknown"])[0]

    def state(self) -> str:
        """What this rank was doing, in words, for a culprit's reason."""
        if self.error:
            first_line = (str(self.error.message).strip().splitlines() or [""])[0]
            return f"raised {self.error.type}: {first_line[:160]}"
        if self.status and self.status.error:
            return f"failed: {self.status.error.strip().splitlines()[0][:160]}"
        if self.status and self.status.phase == "finished":
            return self._after_its_script()
        if self.end and not self.end.ok and not self.end.by_launcher:
            return f"ended by {self.end.in_words()}"
        if self.torch_call:
            call_site = (self.status.where.call_site if self.status and self.status.where else None) \
                or self.location(1)
            return f"waiting in {self.torch_call}, called at {call_site}"
        if self.phase in ("in-collective", "in-init"):
            if self.status and self.status.op:
                return f"waiting in {self.status.op} #{self.status.seq}"
            waited = self._pending_call()
            if waited:  # issued from C++ (DDP's reducer, FSDP's hooks...): no torch.distributed frame to name it
                return f"waiting in {waited} (pending in its flight recorder), called from {self.user_line()}"
            return f"waiting in {self.phase}"
        return f"main thread in its own code at {self.location()}"

    def _after_its_script(self) -> str:
        """A rank whose last status said its script was done: how its process ended wins over that status (a rank
        that hung on its way out can write "finished" and then be ended by the teardown)."""
        end = self.end
        if end is None or end.ok:
            return "finished its script and exited"
        if end.signal is None and end.exit_code is None:
            return "finished its script; its exit was not seen"
        return f"ended by {end.in_words()}, after its last status said its script was done"

    def _pending_call(self) -> str | None:
        """The first collective its flight recorder shows enqueued and not completed, in words."""
        for pg, p in sorted(((self.status.progress if self.status else None) or {}).items()):
            if p.enqueued > p.completed:
                return f"collective #{p.completed + 1} of group {pg}"
        return None


_ABORT = "Fatal Python error: Aborted"
_CURRENT = re.compile(r"^Current thread 0x[0-9a-f]+ \(most recent call first\):\n((?:  File .*\n)*)", re.M)
_FRAME_FILE = re.compile(r'^  File "([^"]*)"', re.M)


def abort_site(path: Path) -> str | None:
    """Where the rank's last SIGABRT came from, by faulthandler's stacks: "own code" for a Python thread outside
    torch.distributed, "library" for a thread without Python frames or one inside torch.distributed, else None."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    at = text.rfind(_ABORT)
    if at < 0:
        return None
    current = _CURRENT.search(text, at)
    frames = _FRAME_FILE.findall(current.group(1)) if current else []
    if not frames:
        return "library"
    return "library" if f"{os.sep}torch{os.sep}distributed{os.sep}" in frames[0] else "own code"


def load_record(path: Path) -> dict | None:
    """A flight-recorder dump, JSON or pickle (torch's default), written by this job's own ranks."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    with contextlib.suppress(ValueError):
        return json.loads(data)
    try:
        record = pickle.loads(data)  # noqa: S301 - written by this job's own ranks
    except Exception:
        return None
    return record if isinstance(record, dict) else None


def read_error(run: RunDir, rank: int) -> RankError | None:
    try:
        return from_json(RankError, json.loads(run.error_file(rank).read_text()))
    except (OSError, ValueError, RecordError):
        return None


def requested(run: RunDir) -> str | None:
    """The id of the last dump request (watcher.request_dumps), or None."""
    try:
        request = json.loads(run.dump_request_file.read_text())
    except (OSError, ValueError):
        return None
    return str(request["id"]) if isinstance(request, dict) and request.get("id") else None


def answered(run: RunDir, rank: int) -> str | None:
    try:
        return run.answered_file(rank).read_text().strip() or None
    except OSError:
        return None


def gather(run: RunDir, ranks: list[int], states: dict[int, RankState], ends: dict[int, RankEnd],
           request_id: str | None, answered_in_time: set[int] | None = None,
           until: float | None = None) -> dict[int, RankEvidence]:
    """Every rank's evidence. ``answered_in_time``: the ranks that answered a hang's dump request while the watcher
    waited (a rank resumed by the teardown answers from elsewhere); None: whoever answered the last request.
    ``until``: when a hang's teardown began; an error or a record after it is the teardown's doing."""
    evidence = {}
    for rank in sorted(set(ranks) | set(states) | set(ends)):
        record = load_record(run.flight_file(rank)) or load_record(run.torch_dump_file(rank))
        error = read_error(run, rank)
        if until is not None:
            record = None if record and float(record.get("dumped_at") or 0) > until else record
            error = None if error and error.at > until else error
        said = rank in answered_in_time if answered_in_time is not None else \
            request_id is not None and answered(run, rank) == request_id
        end = ends.get(rank)
        abort = abort_site(run.fatal_file(rank)) if end is not None and end.signal == "SIGABRT" else None
        evidence[rank] = RankEvidence(rank, status=states.get(rank), record=record, error=error,
                                      end=end, answered=said, abort=abort)
    return evidence
