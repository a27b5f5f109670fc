"""The checks every value a user gives goes through, at the bottom of the import graph.

Pure (no probing, no I/O) and importing nothing of ddplab but its errors, so that the Configs (config.py and
each measurement's), the size arguments (sizes.py) and the option generator (cli_options.py) all use the same
rule and say a refusal in the same words, before any process starts: the value, and what is valid.
"""

from __future__ import annotations

import math
from typing import Iterable

from .errors import UsageError, invalid_choice

# More ranks than this on one node is almost certainly a typo (e.g. 1000 for 10).
MAX_NPROC = 64
MAX_NODES = 1024
# A timeout longer than a day is a typo (or inf, which torch turns into an OverflowError in every rank).
MAX_TIMEOUT_S = 86_400.0
MAX_SIZE_BYTES = 1 << 50  # a pebibyte: no device or host holds one buffer that large


def check_number(value, flag: str, low: float, high: float, *, integer: bool = False, name: str | None = None,
                 low_open: bool = False, high_open: bool = False, unit: str = "", reference: str | None = None) -> None:
    """The one check every numeric option goes through: a finite number inside its range.

    argparse's float() accepts "nan", "inf" and "1e15"; each would start ranks that crash
    (a timedelta of inf seconds) or run forever, so they are refused here, before anything
    starts. ``name`` shows the range as a comparison ("0 < seconds <= 86400"), needed when
    an end is open; without it the range reads "1 to 64".
    """
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


def check_nproc(value, flag: str = "--nproc") -> None:
    """The one rule for how many ranks one node may start (train, run, every multi-rank command and `ddplab
    launch`'s --nproc-per-node): a whole number from 1 to MAX_NPROC, refused before any process starts."""
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
    host, sep, port = text.rpartition(":")
    return bool(sep and host and port.isdigit() and 1 <= int(port) <= 65535)


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
        tol = float(value) / 100
    except ValueError:
        raise UsageError("invalid-tolerance", f'{flag} "{text}" is not a percentage, e.g. 5%') from None
    check_number(tol * 100, flag, 0, high_pct, unit="%", reference="invalid-tolerance")
    return tol


def percent_text(fraction: float) -> str:
    """0.05 -> "5%": a tolerance as the command line spells it."""
    return f"{100 * fraction:g}%"
