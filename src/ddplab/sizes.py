"""nccl-tests size arguments: `-b 8 -e 1G -f 2`. Suffixes K, M, G, T are powers of 1024,
as in nccl-tests; bandwidths are still reported with GB = 1e9 bytes."""

from __future__ import annotations

import math
import re

from .config import MAX_SIZE_BYTES, check_number
from .errors import UsageError

_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
# More sizes than this is a typo: -b 8 -e 16G -f 2 (nccl-tests' usual sweep) is 32 sizes,
# -f 1.1 over the same range about 230; -f 1.0000001 would be about a billion.
MAX_SIZES = 1000
MAX_STEP_FACTOR = float(1 << 20)
_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)B?\s*$", re.IGNORECASE)


def parse_size(text: str, flag: str = "size") -> int:
    m = _SIZE.match(str(text))
    if not m:
        raise UsageError("invalid-size", f'{flag} "{text}" is not a size; use a number with an optional K, M, G '
                                         f"or T suffix (powers of 1024), e.g. 8, 64K, 1G")
    value = int(m.group(1)) * _UNITS[m.group(2).upper()]
    if not 1 <= value <= MAX_SIZE_BYTES:
        raise UsageError("invalid-size", f"{flag} {text} is out of range; valid: 1 byte to {human(MAX_SIZE_BYTES)}")
    return value


def size_range(begin: str, end: str, factor: float) -> list[int]:
    lo, hi = parse_size(begin, "-b/--minbytes"), parse_size(end, "-e/--maxbytes")
    if lo > hi:
        raise UsageError("invalid-size-range", f"-b {begin} ({lo} B) is larger than -e {end} ({hi} B); "
                                               f"the sweep needs minbytes <= maxbytes")
    check_number(factor, "-f", 1, MAX_STEP_FACTOR, name="factor", low_open=True, reference="invalid-step-factor",
                 unit=" (nccl-tests uses 2)")
    sizes, s = [], lo
    while s <= hi:
        if len(sizes) == MAX_SIZES:  # stop building a list that would take minutes to finish
            raise UsageError("too-many-sizes", f"-b {begin} -e {end} -f {factor} makes about "
                                               f"{estimate_size_count(lo, hi, factor):,} sizes; at most {MAX_SIZES}",
                             hint="raise -f/--stepfactor or narrow -b/-e (nccl-tests sweeps use -f 2)")
        sizes.append(s)
        nxt = int(s * factor)
        s = nxt if nxt > s else s + 1
    return sizes


def estimate_size_count(lo: int, hi: int, factor: float) -> int:
    """How many sizes size_range would make, without making them.

    Below 1 / (factor - 1) bytes the factor adds less than a byte and the sizes go up by
    one; above it they grow geometrically.
    """
    linear_end = min(hi, max(lo, math.floor(1 / (factor - 1))))
    count = linear_end - lo + 1
    if hi > linear_end:
        count += int(math.log(hi / linear_end) / math.log(factor))
    return count


def human(n: int) -> str:
    for unit in ("T", "G", "M", "K"):
        if n >= _UNITS[unit] and n % _UNITS[unit] == 0:
            return f"{n // _UNITS[unit]}{unit}"
    return str(n)
