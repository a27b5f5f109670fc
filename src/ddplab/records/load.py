"""Reading a ddplab JSON report back from a file: the file, its encoding, its JSON, and then every field
through the records (Report.from_json), so a report from another machine, another version or anyone's
editor is refused (exit 2, naming the file, the first bad field and what it must be) before anything
renders or compares it.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import DdplabError, UsageError
from .codec import RecordError
from .core import Report


def read_bytes(path: str) -> bytes:
    p = Path(path)
    if not p.is_file():
        raise UsageError("no-such-file", f"{path} is not a file")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise UsageError("unreadable-file", f"{path} cannot be read: {exc.strerror or exc}") from None
    if not data.strip():
        raise UsageError("empty-file", f"{path} is empty")
    return data


def looks_like_json(data: bytes) -> bool:
    return data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"[")


def parse_report(data: bytes, path: str) -> Report:
    """Decode (UTF-8), parse (JSON) and read a ddplab report; UsageError says what is wrong."""
    if b"\0" in data:
        raise UsageError("unreadable-report", f"{path} is a binary file, not a ddplab JSON report")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError("unreadable-report", f"{path} is not UTF-8 text: byte 0x{data[exc.start]:02x} at offset "
                                              f"{exc.start} cannot be decoded") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError("unreadable-report", f"{path} is not JSON: {exc.msg} at line {exc.lineno}, column "
                                              f"{exc.colno}") from None
    except RecursionError:
        raise UsageError("unreadable-report", f"{path} nests JSON too deeply to be a ddplab report") from None
    try:
        return Report.from_json(doc)
    except RecordError as err:
        raise UsageError("invalid-report", f"{path}: field {err.path} must be {err.expected}, but it is {err.got}",
                         hint="the file is not a ddplab report as this version writes it") from None
    except RecursionError:
        raise UsageError("invalid-report", f"{path}: stages nest reports too deeply") from None
    except DdplabError as err:  # a Config that refuses its values (e.g. an out-of-range --nproc)
        raise UsageError("invalid-report", f"{path}: {err.message}",
                         hint="the file is not a ddplab report as this version writes it") from None


def read_report(path: str) -> Report:
    return parse_report(read_bytes(path), path)
