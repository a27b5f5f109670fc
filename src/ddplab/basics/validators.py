"""The checks every value a user gives goes through, at the bottom of the import graph.

Pure and importing nothing of ddplab but its errors, so that the Configs, the size arguments and the option
generator all use the same rule and say a refusal in the same words before any process starts: the value, and
what is valid.
"""

from __future__ import annotations

import math
import os
import re
from typing import Iterable

from ..errors import UsageError, invalid_choice

# More ranks than this on one node is almost certainly a typo (e.g. 1000 for 10).
MAX_NPROC = 64
MAX_NODES = 1024
# A timeout longer than a day is a typo (or inf, which torch turns into an OverflowError in every rank).
MAX_TIMEOUT_S = 86_400.0
MAX_SIZE_BYTES = 1 << 50  # a pebibyte: no device or host holds one buffer that large
# Linux's limits on a path (NAME_MAX, PATH_MAX less its terminating NUL): a longer one fails in the kernel.
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 4095

# Numbers as a command line types them: the digits 0-9. Python's int() and float() also read other scripts'
# digits ("٢" is 2), "1_000" and surrounding spaces, and str.isdigit() says yes to "²", which int() refuses.
_WHOLE = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NOT_FINITE = frozenset(f"{sign}{word}" for sign in ("", "+", "-") for word in ("nan", "inf", "infinity"))
_MAX_NUMBER_CHARS = 64  # int() refuses more than 4300 digits with an error of its own; no option needs 64


def check_number(value, flag: str, low: float, high: float, *, integer: bool = False, name: str | None = None,
                 low_open: bool = False, high_open: bool = False, unit: str = "", reference: str | None = None) -> None:
    """The one check every numeric option goes through: a finite number inside its range ("nan" or "inf" would
    start ranks that crash or run forever). ``name`` shows the range as a comparison ("0 < seconds <= 86400"),
    needed when an end is open; without it the range reads "1 to 64"."""
    reference = reference or f"invalid-{flag.lstrip('-')}"
    if name or low_open or high_open:
        valid = (f"{number_text(low)} {'<' if low_open else '<='} {name or 'value'} "
                 f"{'<' if high_open else '<='} {number_text(high)}{unit}")
    else:
        valid = f"{number_text(low)} to {number_text(high)}{unit}"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        kind = "a whole number" if integer else "a number"
        raise UsageError(reference, f"{flag} {value!r} is not {kind}; valid: {valid}")
    if isinstance(value, float) and not math.isfinite(value):
        raise UsageError(reference, f"{flag} {value} is not a finite number; valid: {valid}")
    too_low = value <= low if low_open else value < low
    too_high = value >= high if high_open else value > high
    if too_low or too_high:
        raise UsageError(reference, f"{flag} {value} is out of range; valid: {valid}")


def read_number(text, flag: str, *, integer: bool = False, reference: str | None = None) -> int | float:
    """The number a command line's ``text`` spells, in the digits 0-9 (``integer``: a whole number, an int;
    otherwise a float), else UsageError naming the value. "nan" and "inf" are read, so that ``check_number``
    refuses them by name."""
    typed = str(text).strip(" ")
    reference = reference or f"invalid-{flag.lstrip('-')}"
    kind = "a whole number" if integer else "a number"
    if len(typed) > _MAX_NUMBER_CHARS:
        raise UsageError(reference, f"{flag} {typed[:20]}... ({len(typed)} characters) is too long for {kind}")
    if integer and _WHOLE.fullmatch(typed):
        return int(typed)
    if not integer and (_DECIMAL.fullmatch(typed) or typed.lower() in _NOT_FINITE):
        return float(typed)
    raise UsageError(reference, f"{flag} {text!r} is not {kind} written with the digits 0-9")


def is_digits(text: str) -> bool:
    """Only the digits 0-9, at least one: what int() may read back without surprise (``str.isdigit`` is true
    of "²" and "٢" too)."""
    return text.isascii() and text.isdigit()


def is_whole_number(text: str) -> bool:
    """Whether ``text`` is a whole number as ``read_number`` reads one."""
    try:
        read_number(text, "", integer=True)
        return True
    except UsageError:
        return False


def check_path_text(text, flag: str) -> str:
    """A path as typed, refused (UsageError, exit 2) where no file could ever have it: empty (it would silently
    mean "not given"), holding a NUL, or longer than the kernel takes (a name over MAX_NAME_BYTES, the whole over
    MAX_PATH_BYTES). Whether it can be written is the caller's to check (files.check_output_*)."""
    text = str(text)
    reference = f"invalid-{flag.lstrip('-')}"
    if not text.strip():
        raise UsageError(reference, f"{flag} {text!r} is empty; give a path, or leave {flag} out for its default")
    if "\0" in text:
        raise UsageError(reference, f"{flag} {text!r} holds a NUL character, which no path can hold")
    encoded = os.fsencode(text)
    longest = max(len(part) for part in encoded.split(b"/"))
    if longest > MAX_NAME_BYTES or len(encoded) > MAX_PATH_BYTES:
        shown = text if len(text) <= 60 else f"{text[:40]}...({len(text)} characters)"
        raise UsageError(reference, f"{flag} {shown} is too long: a name of {longest} bytes, {len(encoded)} in all; "
                                    f"valid: at most {MAX_NAME_BYTES} bytes a name and {MAX_PATH_BYTES} in all")
    return text


def check_nproc(value, flag: str = "--nproc") -> None:
    """The one rule for how many ranks one node may start: a whole number from 1 to MAX_NPROC."""
    check_number(value, flag, 1, MAX_NPROC, integer=True, unit=" ranks per node")


def check_choice(value, what: str, choices: Iterable[str]) -> None:
    """A name from a fixed list, refused with the close match (``invalid_choice``)."""
    choices = tuple(choices)
    if value not in choices:
        raise invalid_choice(what, value, choices)


def require(ok: bool, reference: str, message: str) -> None:
    """A rule between several values, said in the user's terms."""
    if not ok:
        raise UsageError(reference, message)


def is_endpoint(text: str) -> bool:
    """HOST:PORT with a port from 1 to 65535."""
    return split_endpoint(text) is not None


def split_endpoint(text: str) -> tuple[str, int] | None:
    """(host, port) of HOST:PORT, NAME:PORT or [IPv6]:PORT with a port from 1 to 65535; None for anything else."""
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    number = port_number(port)
    return (host, number) if sep and host and 1 <= number <= 65535 else None


def port_number(text: str) -> int:
    """A port written with at most 5 of the digits 0-9, as a number; 0 for anything else (int() reads "٢٩٤٠٠")."""
    return int(text) if is_digits(text) and len(text) <= 5 else 0


def number_text(x: float) -> str:
    """A number as people write it: 1048576, not 1.04858e+06."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def argv_text(value) -> str:
    """A value as a command line spells it back: a list comma-separated, a float in the shortest text that parses
    back to the same float (repr; "%g" rounds)."""
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


def parse_tolerance(text: str, flag: str, high_pct: float) -> float:
    """"5%" or "5" -> 0.05: a percentage from 0 to ``high_pct``."""
    value = str(text).strip().rstrip("%")
    try:
        tol = read_number(value, flag) / 100
    except UsageError:
        raise UsageError("invalid-tolerance", f'{flag} "{text}" is not a percentage written with the digits 0-9, '
                                              "e.g. 5%") from None
    check_number(tol * 100, flag, 0, high_pct, unit="%", reference="invalid-tolerance")
    return tol


def percent_text(fraction: float) -> str:
    """0.05 -> "5%": a tolerance as the command line spells it."""
    return f"{100 * fraction:g}%"
