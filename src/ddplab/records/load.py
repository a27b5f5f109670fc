"""Reading a ddplab JSON report back from a file, the part records can do alone: the file (its size capped before it
is read), its encoding, its JSON, and how a bad field is said. catalog.read_report then reads every field through
the records, so that a report from anywhere is refused (exit 2, naming the file and the first bad field) before
anything renders or compares it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .codec import RecordError

HINT = "the file is not a ddplab report as this version writes it"
# The largest report ddplab has written (the full lab on two GPUs, 2.2 MB) fifteen times over: a file beyond it is
# refused before it is read, so a huge one cannot exhaust memory. nccl-tests output is far smaller.
MAX_INPUT_BYTES = 32 * 1024 * 1024


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
