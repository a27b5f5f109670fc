"""The catalog of every kind of report ddplab writes: the measurements, `run`, `launch` and `clean` (of the shape
records.core.Kind), and two read through records alone: a comparison's (its record judges itself) and a check's.

Everything that reads a report goes through here: its Config and results classes (``types_for``), and the verdict
judged again from its data with its check rows (``judged``); a report file is read with its size capped first, its
encoding and JSON checked, a bad field said in the document's own spelling. It imports nothing of the lab: a kind's
module is imported by name when a report of that kind is read, so reading a sweep's report never loads what runs a lab.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

from .. import measurements
from ..errors import DdplabError, UsageError
from ..measurements import judged_by
from ..records import RecordError, Report

# What else writes a report in a measurement's shape: the lab, the user's job, the orphan sweep.
OTHER_KINDS: dict[str, str] = {
    "run": "ddplab.lab.run",
    "launch": "ddplab.job.run",
    "clean": "ddplab.lab.clean",
}
# Reports read through their records alone: command -> (config module, config class, results module, results class).
BY_RECORDS: dict[str, tuple[str, str, str, str]] = {
    "compare": ("ddplab.records.compare", "CompareConfig", "ddplab.records.compare", "CompareRecord"),
    "check": ("ddplab.check.config", "CheckConfig", "ddplab.check.record", "CheckRecord"),
}
SELF_JUDGED = ("compare",)  # its record's checks() judge it (the tolerance it was asked for travels in it)


def kinds() -> list[str]:
    """Every name a report's "command" may have, measurements first."""
    return [*measurements.MEASUREMENTS, *OTHER_KINDS, *BY_RECORDS]


def kind_of(command: str):
    """The kind (module) of a report's command; None for one read through its records alone."""
    if command in measurements.MEASUREMENTS:
        return measurements.get(command)
    if command in OTHER_KINDS:
        return importlib.import_module(OTHER_KINDS[command])
    return None


def types_for(command: str, where: str = "$.command") -> tuple[type, type, type]:
    """(Config class, results class, platform class) of a command's report; RecordError for a command ddplab
    never wrote. The platform is the probed machine's, or what the record says it holds (a job's launcher host)."""
    from ..platform import Platform

    kind = kind_of(command)
    if kind is not None:
        config_cls, results_cls = kind.Config, kind.Record
    elif command in BY_RECORDS:
        config_module, config_name, results_module, results_name = BY_RECORDS[command]
        config_cls = getattr(importlib.import_module(config_module), config_name)
        results_cls = getattr(importlib.import_module(results_module), results_name)
    else:
        raise RecordError(where, f"a ddplab command ({', '.join(sorted(kinds()))})", command)
    return config_cls, results_cls, getattr(results_cls, "platform_type", Platform)


def report_from_json(doc: Any, where: str = "$") -> Report:
    """Any report ddplab wrote, rebuilt and validated through this catalog (not judged again: ``read_report``)."""
    return Report.from_json(doc, where, types_for)


def judged(report: Report) -> Report:
    """``report`` with its verdict derived again from its data (measurements.judged_by) by what judges its kind: the
    kind, its record's class (a comparison), or nothing (a check)."""
    command = report.command
    return judged_by(types_for(command)[1] if command in SELF_JUDGED else kind_of(command), report)


# ------------------------------------------------------------------------------------------- a report file

HINT = "the file is not a ddplab report as this version writes it"
# Many times the largest report ddplab has written (docs/RESULTS.md): a file beyond it is refused before it is read,
# so a huge one cannot exhaust memory. nccl-tests output is far smaller.
MAX_INPUT_BYTES = 32 * 1024 * 1024


def read_report(path: str) -> Report:
    """A report file, read, every field checked (UsageError names the file and the first bad field: exit 2) and judged
    again from its data: the verdicts it stored are not taken on trust."""
    return parse_report(read_bytes(path), path)


def parse_report(data: bytes, path: str) -> Report:
    return report_from_document(parse_json(data, path), path)


def report_from_document(doc: Any, path: str) -> Report:
    if not isinstance(doc, dict):
        raise UsageError("invalid-report", f"{path}: field (document) must be a JSON object (a ddplab report), "
                                           f"but it is {show(doc)}", hint=HINT)
    try:
        report = report_from_json(doc)
    except RecordError as err:
        raise UsageError("invalid-report", f"{path}: {field_message(err)}", hint=HINT) from None
    except RecursionError:
        raise UsageError("invalid-report", f"{path}: stages nest reports too deeply") from None
    except DdplabError as err:  # refused outside the codec's reach: say so with the file's name
        raise UsageError("invalid-report", f"{path}: {err.message}", hint=HINT) from None
    return judged(report)


def read_bytes(path: str) -> bytes:
    """The file's bytes, refused (UsageError) when it is no file, unreadable, empty or over MAX_INPUT_BYTES."""
    p = Path(path)
    if not p.is_file():
        raise UsageError("no-such-file", f"{path} is not a file")
    try:
        with p.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            data = f.read(MAX_INPUT_BYTES + 1) if size <= MAX_INPUT_BYTES else b""
    except OSError as exc:
        raise UsageError("unreadable-file", f"{path} cannot be read: {exc.strerror or exc}") from None
    if size > MAX_INPUT_BYTES or len(data) > MAX_INPUT_BYTES:  # the size said, or what a growing file gave
        raise UsageError("file-too-large", f"{path} is {max(size, len(data)):,} bytes; a ddplab report or "
                                           f"nccl-tests output is at most {MAX_INPUT_BYTES:,} bytes (32 MiB)")
    if not data.strip():
        raise UsageError("empty-file", f"{path} is empty")
    return data


def looks_like_json(data: bytes) -> bool:
    return data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"[")


def parse_json(data: bytes, path: str) -> Any:
    """Decode (UTF-8) and parse (JSON); UsageError says what is wrong with the file."""
    if b"\0" in data:
        raise UsageError("unreadable-report", f"{path} is a binary file, not a ddplab JSON report")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError("unreadable-report", f"{path} is not UTF-8 text: byte 0x{data[exc.start]:02x} at offset "
                                              f"{exc.start} cannot be decoded") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError("unreadable-report", f"{path} is not JSON: {exc.msg} at line {exc.lineno}, column "
                                              f"{exc.colno}") from None
    except RecursionError:
        raise UsageError("unreadable-report", f"{path} nests JSON too deeply to be a ddplab report") from None


def field_message(err: RecordError) -> str:
    """The bad field in the document's own spelling: "field results.rows[0].size_bytes must be ..."."""
    field = err.path[2:] if err.path.startswith("$.") else "(document)" if err.path == "$" else err.path
    if err.missing:
        return f"field {field} is missing; it must be {err.expected}"
    return f"field {field} must be {err.expected}, but it is {show(err.value)}"


def show(value) -> str:
    """The bad value as the user will recognise it: its JSON spelling, cut short."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = json.dumps(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"the string {text}" if isinstance(value, str) else text
