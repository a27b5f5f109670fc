"""nccl-tests size arguments: `-b 8 -e 1G -f 2`. Suffixes K, M, G, T are powers of 1024,
as in nccl-tests; bandwidths are still reported with GB = 1e9 bytes. ``SizeRange`` spells a Config's list of
sizes on the command line that way (basics/cli_options.py), for the sweep and pairwise."""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import MISSING, dataclass

from ..errors import UsageError
from .validators import MAX_SIZE_BYTES, argv_text, check_number, read_number, require

_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
# More sizes than this is a typo: -b 8 -e 16G -f 2 (nccl-tests' usual sweep) is 32 sizes,
# -f 1.1 over the same range about 230; -f 1.0000001 would be about a billion.
MAX_SIZES = 1000
MAX_STEP_FACTOR = float(1 << 20)
DEFAULT_FACTOR = 2.0  # nccl-tests' usual -f, preferred when several factors give the same sizes
_SIZE = re.compile(r"^\s*([0-9]{1,30})\s*([KMGT]?)B?\s*$", re.IGNORECASE)  # 0-9 only: \d also reads "٢" as 2


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
    """How many sizes size_range would make, without making them: below 1 / (factor - 1) bytes the sizes go up
    by one; above it they grow geometrically."""
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


def human_bytes(n: int | None) -> str:
    """A byte count as a reader says it: 512 B, 1.5 KiB, 64.0 MiB ("n/a" for None)."""
    if n is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def range_args(sizes: tuple[int, ...] | list[int]) -> tuple[str, str, float] | None:
    """-b/-e/-f text that ``size_range`` turns back into exactly ``sizes``; None when no range gives them.

    Each step s -> t of size_range bounds the factor: t = int(s * f) > s needs t/s <= f < (t+1)/s, and t = s + 1
    needs f < (s+2)/s. The factor chosen is DEFAULT_FACTOR when it fits, else the shortest decimal that does.
    """
    sizes = list(sizes)
    if not sizes or any(not isinstance(s, int) or s < 1 for s in sizes):
        return None
    low, high = 1.0, MAX_STEP_FACTOR
    for s, t in zip(sizes, sizes[1:]):
        if t <= s:
            return None
        if t == s + 1:
            high = min(high, (s + 2) / s)
        else:
            low, high = max(low, t / s), min(high, (t + 1) / s)
    begin, end = human(sizes[0]), human(sizes[-1])
    for factor in _factor_candidates(low, high):
        try:
            if size_range(begin, end, factor) == sizes:
                return begin, end, factor
        except UsageError:
            continue
    return None


def _factor_candidates(low: float, high: float):
    """Factors near [low, high) above 1, most readable first: DEFAULT_FACTOR, then fewer decimals. The bounds are
    widened by a rounding error (size_range multiplies in floating point); the caller checks each one."""
    low, high = low * (1 - 1e-12), high * (1 + 1e-12)
    if low <= DEFAULT_FACTOR < high:
        yield DEFAULT_FACTOR
    for digits in range(0, 17):
        scale = 10 ** digits
        candidate = max(math.ceil(low * scale), scale + 1) / scale
        if candidate < high:
            yield candidate


@dataclass(frozen=True)
class SizeRange:
    """A Config's sizes (a tuple of bytes), spelt as nccl-tests spells them: -b/--minbytes, -e/--maxbytes,
    -f/--stepfactor, each defaulting to what gives the field's default back. The Config keeps the sizes it
    measures; its command line is derived from them (``range_args``)."""

    OPTIONS = (("-b", "--minbytes"), ("-e", "--maxbytes"), ("-f", "--stepfactor"))

    def add(self, parser: argparse.ArgumentParser, slot) -> None:
        from .cli_options import help_text  # above this module: it reads the Configs that use SizeRange

        begin, end, factor = range_args(slot.default)
        helps = (help_text("smallest size in bytes, with K, M, G or T for powers of 1024, as nccl-tests' -b", begin),
                 help_text("largest size, as nccl-tests' -e", end),
                 help_text("each size is the one before times this, as nccl-tests' -f", argv_text(factor)))
        for (short, long), helped in zip(self.OPTIONS, helps):  # read as typed: sizes and the factor below
            parser.add_argument(short, long, dest=long.lstrip("-"), default=argparse.SUPPRESS, help=helped)

    def read(self, args, slot):
        given = [getattr(args, long.lstrip("-"), None) for _, long in self.OPTIONS]
        if given == [None, None, None]:
            return MISSING
        default = range_args(slot.default)
        begin, end, factor = (g if g is not None else d for g, d in zip(given, default))
        if given[2] is not None:
            factor = read_number(factor, "-f", reference="invalid-step-factor")
        return tuple(size_range(begin, end, factor))

    def argv(self, value, default) -> list[str]:
        """-b/-e/-f that give the same sizes back; each left out where it is the default's."""
        begin, end, factor = range_args(value)
        out = []
        if value[0] != default[0]:
            out += ["-b", begin]
        if value[-1] != default[-1]:
            out += ["-e", end]
        if factor != range_args(default)[2]:
            out += ["-f", argv_text(factor)]
        return out

    def check(self, sizes, slot) -> None:
        """Sizes as nccl-tests' -b/-e/-f make them (the command line spells them back that way)."""
        require(0 < len(sizes) <= MAX_SIZES, "invalid-sizes", f"{len(sizes)} sizes; valid: 1 to {MAX_SIZES}")
        for size in sizes:
            check_number(size, "size", 1, MAX_SIZE_BYTES, integer=True, unit=" bytes", reference="invalid-size")
        require(range_args(sizes) is not None, "invalid-sizes",
                f"sizes {list(sizes)[:6]}{'...' if len(sizes) > 6 else ''} are not a range that "
                f"-b/-e/-f make (each size int(previous * factor), the same factor throughout)")
