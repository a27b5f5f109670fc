"""Axes for the report's charts, display-free: where the ticks go and how their labels read. At least three labelled
ticks per axis, so values can be read off; sizes in binary units, as nccl-tests' sizes are powers of two; times in the
unit that keeps them short. charts.py maps values to pixels with ``Scale`` and writes these labels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIN_TICKS = 3

# What an axis's values are, so that its ticks can say so in the unit a reader expects.
BYTES, MICROSECONDS, SECONDS, GBPS, COUNT, MIB, PLAIN = "bytes", "us", "s", "GB/s", "count", "MiB", "plain"


@dataclass(frozen=True)
class Scale:
    """Values between ``lo`` and ``hi`` onto pixels between ``start`` and ``end`` (end < start: upwards)."""

    lo: float
    hi: float
    start: float
    end: float
    log: bool = False

    def __call__(self, value: float) -> float:
        if self.log:
            value = max(value, self.lo)
            a, b, v = math.log10(self.lo), math.log10(self.hi), math.log10(value)
        else:
            a, b, v = self.lo, self.hi, value
        return self.start + (self.end - self.start) * (v - a) / ((b - a) or 1.0)


def domain(values: list[float], log: bool, include_zero: bool = False, unit: str = PLAIN) -> tuple[float, float]:
    """The range an axis spans: the values', widened to whole decades on a log axis (powers of two for sizes,
    spanning at least two so that three ticks fit) and to a round top on a linear one (from zero where asked:
    bars, bandwidths, counts)."""
    values = [v for v in values if math.isfinite(v) and (v > 0 or not log)]
    if not values:
        return (1.0, 10.0) if log else (0.0, 1.0)
    lo, hi = min(values), max(values)
    if log and unit == BYTES:
        a, b = math.floor(math.log2(lo) + 1e-9), math.ceil(math.log2(hi) - 1e-9)
        if b - a < 2:
            a, b = a - 1, a + 1 + max(0, b - a)
        return 2.0 ** a, 2.0 ** b
    if log:
        lo, hi = 10 ** math.floor(math.log10(lo)), 10 ** math.ceil(math.log10(hi))
        return (lo, hi * 10) if hi <= lo else (lo, hi)
    if include_zero:
        lo = min(lo, 0.0)
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    step = _nice_step((hi - lo) / 4)
    return math.floor(lo / step) * step, math.ceil(hi / step) * step


def linear_ticks(lo: float, hi: float, most: int = 7) -> list[float]:
    """Round values from ``lo`` to ``hi``: 3 to about ``most`` of them."""
    step = _nice_step((hi - lo) / (most - 1))
    while step > 0 and (hi - lo) / step < MIN_TICKS - 1:
        step = _smaller(step)
    first = math.ceil(lo / step - 1e-9) * step
    ticks, v = [], first
    while v <= hi + step * 1e-9:
        ticks.append(round(v, 12))
        v += step
    return ticks


def log_ticks(lo: float, hi: float, unit: str = PLAIN) -> list[float]:
    """Ticks on a log axis: powers of two for sizes (every 2nd, 4th... power so that at most 8 show), decades
    for anything else, with 2 and 5 between them when the axis spans fewer than two decades."""
    if unit == BYTES:
        a, b = math.ceil(math.log2(lo) - 1e-9), math.floor(math.log2(hi) + 1e-9)
        for stride in (1, 2, 4, 5, 10, 20):  # powers aligned to the stride: 1 KiB, 1 MiB, 1 GiB at 10
            powers = [e for e in range(a, b + 1) if e % stride == 0]
            if len(powers) <= 8:
                return [2.0 ** e for e in (powers if len(powers) >= MIN_TICKS else range(a, b + 1))]
        return [2.0 ** e for e in range(a, b + 1) if e % 20 == 0]
    a, b = math.floor(math.log10(lo) + 1e-9), math.ceil(math.log10(hi) - 1e-9)
    decades = [10.0 ** e for e in range(a, b + 1) if lo * (1 - 1e-9) <= 10.0 ** e <= hi * (1 + 1e-9)]
    if len(decades) >= MIN_TICKS:
        return decades
    steps = [m * 10.0 ** e for e in range(a - 1, b + 1) for m in (1, 2, 5)]
    return [v for v in steps if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9)]


def tick_label(value: float, unit: str) -> str:
    """A tick's label in the axis's unit: 4 KiB, 250 us, 1.5 ms, 12 GB/s, 3 s."""
    if unit == BYTES:
        return size_label(value)
    if unit == MICROSECONDS:
        return duration_label(value * 1e-6)
    if unit == SECONDS:
        return duration_label(value)
    return number_label(value)


def tick_labels(ticks: list[float], unit: str, log: bool) -> list[str]:
    """The labels of one axis: on a linear time axis all in one unit (0, 250, 500, 750 ms), chosen by its largest
    tick, so that the steps read evenly; elsewhere each in its own (100 us, 1 ms, 10 ms on a decade axis)."""
    if log or unit not in (SECONDS, MICROSECONDS) or not ticks:
        return [tick_label(t, unit) for t in ticks]
    scale = 1e-6 if unit == MICROSECONDS else 1.0
    top = max(abs(t) for t in ticks) * scale
    name, factor = next(((n, f) for n, f in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)) if top >= f * (1 - 1e-9)),
                        ("ns", 1e-9))
    return [f"{number_label(t * scale / factor)} {name}" for t in ticks]


def size_label(n: float) -> str:
    """Bytes in binary units, as nccl-tests' power-of-two sizes read: 8 B, 1 KiB, 64 MiB, 1.5 GiB."""
    for unit, factor in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if abs(n) >= factor:
            return f"{number_label(n / factor)} {unit}"
    return f"{number_label(n)} B"


def duration_label(seconds: float) -> str:
    """A time in the unit that keeps it short: 800 ns, 38 us, 1.5 ms, 12 s."""
    a = abs(seconds)
    if a == 0:
        return "0 s"
    for unit, factor in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if a >= factor * (1 - 1e-9):
            return f"{number_label(seconds / factor)} {unit}"
    return f"{number_label(seconds / 1e-9)} ns"


def number_label(v: float) -> str:
    """A short number: 3 significant digits (whole numbers from 100 on: 1830, not 1.83e+03), no trailing zeros,
    ten thousand and more as 12.3k."""
    if v == 0:
        return "0"
    if abs(v) >= 10_000:
        return f"{v / 1000:.3g}k"
    if abs(v) >= 100:
        return f"{v:.0f}"
    text = f"{v:.3g}"
    if "e" in text:  # .3g writes 1e-05 for tiny values: keep the digits instead
        text = f"{v:.6f}".rstrip("0").rstrip(".")
    return text


def _nice_step(raw: float) -> float:
    if raw <= 0 or not math.isfinite(raw):
        return 1.0
    exp = math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * 10 ** exp >= raw * (1 - 1e-9):
            return m * 10 ** exp
    return 10 ** (exp + 1)


def _smaller(step: float) -> float:
    exp = math.floor(math.log10(step) + 1e-9)
    mantissa = round(step / 10 ** exp, 6)
    return {1: 0.5, 2: 1, 2.5: 1, 5: 2}.get(mantissa, 1) * 10 ** exp
