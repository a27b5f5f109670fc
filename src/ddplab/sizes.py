"""nccl-tests size arguments: `-b 8 -e 1G -f 2`. Suffixes K, M, G, T are powers of 1024,
as in nccl-tests; bandwidths are still reported with GB = 1e9 bytes."""

from __future__ import annotations

import re

from .errors import UsageError

_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)B?\s*$", re.IGNORECASE)


def parse_size(text: str, flag: str = "size") -> int:
    m = _SIZE.match(str(text))
    if not m:
        raise UsageError("invalid-size", f'{flag} "{text}" is not a size; use a number with an optional K, M, G '
                                         f"or T suffix (powers of 1024), e.g. 8, 64K, 1G")
    value = int(m.group(1)) * _UNITS[m.group(2).upper()]
    if value < 1:
        raise UsageError("invalid-size", f"{flag} {text} must be at least 1 byte")
    return value


def size_range(begin: str, end: str, factor: float) -> list[int]:
    lo, hi = parse_size(begin, "-b/--minbytes"), parse_size(end, "-e/--maxbytes")
    if lo > hi:
        raise UsageError("invalid-size-range", f"-b {begin} ({lo} B) is larger than -e {end} ({hi} B); "
                                               f"the sweep needs minbytes <= maxbytes")
    if factor <= 1:
        raise UsageError("invalid-step-factor", f"-f {factor} must be greater than 1 (nccl-tests uses 2)")
    sizes, s = [], lo
    while s <= hi:
        sizes.append(s)
        nxt = int(s * factor)
        s = nxt if nxt > s else s + 1
    return sizes


def human(n: int) -> str:
    for unit in ("T", "G", "M", "K"):
        if n >= _UNITS[unit] and n % _UNITS[unit] == 0:
            return f"{n // _UNITS[unit]}{unit}"
    return str(n)
