"""Read nccl-tests text output (and rccl-tests' and mccl-tests', the same table) into the sweep's own rows, so
both line up in `ddplab compare`. Robust to what real logs contain: INFO and WARN lines inside the table, `#`
headers, tables with or without the redop/root columns, N/A cells, several collectives in one file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from .. import collectives
from ..records.sweep import SweepRow

_COLLECTIVE = re.compile(r"Collective test (?:starting|concluded):\s*(\w+?)_perf")
_BINARY = re.compile(r"\b(\w+?)_perf\b")
_RANK_LINE = re.compile(r"^#\s*Rank\s+\d+\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+")
_TYPES = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16",
          "fp8_e4m3", "fp8_e5m2", "int", "char"}


UNNAMED = ""  # the op of rows no "<name>_perf" line has named (yet)


@dataclass
class NcclTestsTable:
    rows: list[SweepRow]
    world_size: int | None  # from the "# Rank N ..." lines, when present
    avg_busbw_gbps: float | None


def parse(text: str) -> NcclTestsTable:
    rows: list[SweepRow] = []
    op = UNNAMED
    ranks = 0
    avg = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            m = _COLLECTIVE.search(stripped) or (_BINARY.search(stripped) if "_perf" in stripped else None)
            if m:
                op = op_names().get(m.group(1), m.group(1))
                # "concluded" comes after its table: name the rows that were read without one.
                rows = [r if r.op else replace(r, op=op) for r in rows]
            if _RANK_LINE.match(stripped):
                ranks += 1
            if "Avg bus bandwidth" in stripped:
                avg = _number(stripped.split(":")[-1])
            continue
        rows.extend(_parse_row(stripped.split(), op) or ())
    return NcclTestsTable(rows=rows, world_size=ranks or None, avg_busbw_gbps=avg)


def op_names() -> dict[str, str]:
    """nccl-tests binary stem -> ddplab collective name, as each collective's spec says (collectives/<name>.py)."""
    return {spec.nccl_tests: spec.name for spec in collectives.specs() if spec.nccl_tests}


def _parse_row(tokens: list[str], op: str) -> list[SweepRow] | None:
    """A data row: size count type [redop root] then 4 cells per placement. Anything else is None."""
    if len(tokens) < 11 or not (tokens[0].isdigit() and tokens[1].isdigit()) or tokens[2] not in _TYPES:
        return None
    i = 3
    if _number(tokens[i]) is None and tokens[i].upper() != "N/A":  # redop column (sum, prod, none, ...)
        i += 1
    if len(tokens) - i >= 9 and re.fullmatch(r"-?\d+", tokens[i]):  # root column
        i += 1
    cells = tokens[i:i + 8]
    if len(cells) < 8:
        return None
    size, count, dtype = int(tokens[0]), int(tokens[1]), tokens[2]
    out = []
    for in_place, (t, alg, bus, wrong) in ((False, cells[0:4]), (True, cells[4:8])):
        if t.upper() == "N/A" and alg.upper() == "N/A":
            continue
        out.append(SweepRow(op=op, dtype=dtype, size_bytes=size, count=count, in_place=in_place, time_us=_number(t),
                            algbw_gbps=_number(alg), busbw_gbps=_number(bus),
                            num_wrong=int(wrong) if wrong.isdigit() else None))
    return out


def _number(text: str) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None
