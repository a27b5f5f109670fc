"""torch's flight recorder (FR): the environment that switches it on, and reading it in a rank.

It keeps, per rank, the last collectives each process group issued and a per-group status (last enqueued /
started / completed). torch has a generic recorder (gloo and other CPU backends) and the NCCL process group's own,
each with its own functions and older environment names; those vendor names are data here, so nothing outside
this package spells them. Facts and versions: docs/flight-recorder.md.
"""

from __future__ import annotations

import json
import sys

from .vendors import HOST_CPU

# Every name torch reads for the same setting, current name first (the older, NCCL's, are the only ones before 2.9).
BUFFER_SIZE_ENV = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
DUMP_FILE_ENV = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
CURRENT_NAMES_FROM = (2, 9)  # torch reads the TORCH_FR_* names from this release on

# torch's own default buffer from 2.11 on; before 2.11 the recorder is off (0) unless set.
DEFAULT_BUFFER_ENTRIES = 2000

# In-process dump functions of torch._C._distributed_c10d, vendor's first (the generic one is gloo's). Each takes
# (includeCollectives, onlyActive) and returns JSON bytes; without collectives it is only the per-group status,
# cheap enough to poll. Stack traces are never asked for: collecting them needs the GIL and can hang the dump.
JSON_DUMPERS = ("_dump_nccl_trace_json", "_dump_fr_trace_json")
# The same dumps as pickle, each taking (includeCollectives, includeStackTraces, onlyActive): for the full record
# about half the cost of JSON (docs/flight-recorder.md). Both hold the GIL, so a rank's main thread waits for them.
PICKLE_DUMPERS = ("_dump_nccl_trace", "_dump_fr_trace")
# The vendor's recorder times each collective on the device (``duration_ms``, from when it could start on its
# stream to its end) only with this switched on; the generic recorder keeps the enqueue time alone.
TIMING_ENV = "TORCH_NCCL_ENABLE_TIMING"
# The generic recorder (gloo and other host backends) counts every group itself, and its "completed" counter can
# lag the call's return by up to about a second: a collective pending there is a wait only once it persists.
GENERIC_RECORDER = JSON_DUMPERS[1]


def counts_lag(recorder: str | None) -> bool:
    """Whether this recorder's "completed" counter can trail a collective that already returned (GENERIC_RECORDER)."""
    return recorder == GENERIC_RECORDER


def records_every_group() -> bool:
    """Whether this process's torch has the generic recorder, which gloo's groups write to (torch 2.8 on). For a
    supervisor only: it imports torch."""
    import torch.distributed  # noqa: F401  (loads the c10d extension)

    return hasattr(_c10d(), GENERIC_RECORDER)


def recorder_environment(environ: dict[str, str], dump_prefix: str, torch_version: tuple[int, int]) -> dict[str, str]:
    """What to add to a rank's environment so that its flight recorder is on and dumps into ``dump_prefix`` (torch
    appends the rank). A setting the user made, under any of its names, is left alone, a buffer of 0 included."""
    names = 0 if torch_version >= CURRENT_NAMES_FROM else 1
    wanted = {}
    if not any(name in environ for name in BUFFER_SIZE_ENV):
        wanted[BUFFER_SIZE_ENV[names]] = str(DEFAULT_BUFFER_ENTRIES)
    if not any(name in environ for name in DUMP_FILE_ENV):
        wanted[DUMP_FILE_ENV[names]] = dump_prefix
    return wanted


def timing_environment(environ: dict[str, str]) -> dict[str, str]:
    """What to add to a rank's environment so that the vendor's recorder times each collective on the device; a
    setting the user made (0 included) is left alone."""
    return {} if TIMING_ENV in environ else {TIMING_ENV: "1"}


def user_buffer_setting(environ: dict[str, str]) -> str | None:
    """The buffer size the user chose, under whichever name, or None."""
    for name in BUFFER_SIZE_ENV:
        if name in environ:
            return f"{name}={environ[name]}"
    return None


def _c10d():
    """torch's c10d extension if this process has loaded it; never imports torch itself (a side thread importing
    torch while the main thread does can deadlock on import locks)."""
    c10d = sys.modules.get("torch._C._distributed_c10d")
    return c10d if c10d is not None else getattr(sys.modules.get("torch._C"), "_distributed_c10d", None)


def read(include_collectives: bool, only_active: bool = False) -> dict | None:
    """This rank's flight record (or only its per-group status), from the recorder that has process groups in it;
    None before torch.distributed is loaded or when none has. ``only_active`` leaves out completed collectives."""
    for name, record in _dumps(JSON_DUMPERS, lambda dump: json.loads(dump(include_collectives, only_active))):
        if record.get("pg_status"):
            record["recorder"] = name
            return record
    return None


def read_entries() -> tuple[str, list[dict]] | None:
    """(the dump function that answered, every entry of this rank's flight record, without stack traces); None
    where no recorder has any. Costs as much as the whole buffer, however few entries are new."""
    import pickle

    for name, record in _dumps(PICKLE_DUMPERS, lambda dump: pickle.loads(dump(True, False, False))):
        if record.get("entries"):
            return name, record["entries"]
    return None


def _dumps(names: tuple[str, ...], decode):
    """(name, decoded answer) of each dump function of ``names`` this process's torch has, in order."""
    c10d = _c10d()
    for name in names if c10d is not None else ():
        dumper = getattr(c10d, name, None)
        if dumper is None:
            continue
        try:
            yield name, decode(dumper)
        except Exception:  # a recorder torch built but cannot dump here: try the next one
            continue


def why_no_entries(environ: dict[str, str]) -> str | None:
    """Why a rank inside its process group has no recorded collectives, where that is known for good: the user
    switched the recorder off, or this torch has no recorder for the group's backend: none at all, or a group on the
    host's backend without the generic recorder (torch before 2.8 built for a device has the vendor's recorder
    only). None: none recorded yet."""
    setting = user_buffer_setting(environ)
    if setting is not None and setting.partition("=")[2].strip() == "0":
        return f"the flight recorder is off ({setting})"
    c10d = _c10d()
    if c10d is not None and (not any(hasattr(c10d, name) for name in PICKLE_DUMPERS) or (
            not hasattr(c10d, GENERIC_RECORDER) and _group_backend() == HOST_CPU.backend)):
        return "this torch has no flight recorder for the job's backend (gloo's arrived in torch 2.8)"
    return None


def _group_backend() -> str | None:
    """The default process group's backend in this process, or None; never imports torch (``_c10d``)."""
    dist = sys.modules.get("torch.distributed")
    try:
        return str(dist.get_backend()) if dist is not None and dist.is_initialized() else None
    except Exception:  # a group being torn down: not known
        return None


def enqueued_by_group(entries: list[dict]) -> dict[str, list[int]]:
    """{process group: the sequence numbers of its recorded collectives}. A point-to-point entry carries the
    group's collective count at the time, so it counts as that collective still going."""
    seqs: dict[str, list[int]] = {}
    for entry in entries:
        group = entry.get("process_group") or [entry.get("pg_id")]
        seqs.setdefault(str(group[0]), []).append(int(entry.get("collective_seq_id", -1)))
    return seqs


class StatusReader:
    """The per-group status a rank's beacon polls, counted from the recorder's entries where torch keeps none.

    Under NCCL's blocking wait (TORCH_NCCL_BLOCKING_WAIT=1) torch keeps no work list, and only that list updates the
    per-group status: every count stays -1, so a rank stuck behind a stalled peer looks as if it waits for nothing.
    The recorder still records each collective. For a group whose count never moved, the status is read from the
    entries not completed yet and the highest sequence number seen so far: a lower bound, exact while a collective
    is stuck. Only for the vendor's recorder, and only while no group of the rank has a count (the generic
    recorder counts its groups itself, and its entries never leave "scheduled").
    """

    def __init__(self):
        self._highest: dict[str, int] = {}

    def read(self) -> dict | None:
        record = read(include_collectives=False)
        if record is None or counts_lag(record["recorder"]) or any(
                int(counts.get("last_enqueued_collective", -1)) >= 0 for counts in record["pg_status"].values()):
            return record
        active = read(include_collectives=True, only_active=True) or {}
        going = [e for e in active.get("entries") or [] if e.get("state") != "completed"]
        return {**record, "pg_status": self._counted(record["pg_status"], enqueued_by_group(going))}

    def _counted(self, status: dict, going: dict[str, list[int]]) -> dict:
        counted = {}
        for group, counts in status.items():
            seqs = going.get(str(group), [])
            highest = self._highest[str(group)] = max([self._highest.get(str(group), -1), *seqs])
            counted[group] = counts if highest < 0 else {
                **counts, "last_enqueued_collective": highest,
                "last_completed_collective": min(seqs) - 1 if seqs else highest}
        return counted
