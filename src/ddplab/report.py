"""Writing a report file, and the small numbers helpers reports share.

The JSON document itself (its envelope and contract keys) is records.core.Report; this module writes it
atomically and formats what it holds.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path


STDOUT = "-"  # `--json -`: the JSON goes to standard output


def write_json(doc: dict, path: str | Path) -> Path | None:
    """Write the document atomically: a full disk leaves the previous file (or none), never half a JSON. Its
    directory exists (checked before the run: files.check_output_file; a lab's own directory): none is made.
    STDOUT ("-"): printed to standard output instead (None returned)."""
    from .files import write_text_atomic

    text = json.dumps(doc, indent=2) + "\n"
    if str(path) == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return None
    return write_text_atomic(path, text)


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100): always a value that was measured."""
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[k]


def human_bytes(n: int | None) -> str:
    if n is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
