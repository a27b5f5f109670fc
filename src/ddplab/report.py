"""The JSON document every command writes, and the verdict rules around it.

Top-level keys are a public contract (users' CI parses them):
    schema_version, command, config, platform, results, verdict
plus informative extras (ddplab_version, created_utc, argv). Bump SCHEMA_VERSION
when a key changes meaning or disappears; adding keys does not bump it.
"""

from __future__ import annotations

import datetime
import json
import math
import sys
from pathlib import Path

from . import __version__
from .errors import ExitCode

SCHEMA_VERSION = 1
VERDICTS = ("pass", "warn", "fail")


def document(command: str, config: dict, platform: dict | None, results: dict, verdict: str) -> dict:
    if verdict not in VERDICTS:
        raise ValueError(f"verdict {verdict!r} not in {VERDICTS}")
    return {
        "schema_version": SCHEMA_VERSION,
        "command": command,
        "config": config,
        "platform": platform,
        "results": results,
        "verdict": verdict,
        "ddplab_version": __version__,
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "argv": sys.argv[1:],
    }


def write_json(doc: dict, path: str | Path) -> Path:
    """Write the document atomically: a full disk leaves the previous file (or none), never half a JSON."""
    from .files import write_text_atomic

    return write_text_atomic(path, json.dumps(doc, indent=2, default=_jsonable) + "\n", make_parents=True)


def worst(verdicts) -> str:
    verdicts = list(verdicts)
    for v in ("fail", "warn"):
        if v in verdicts:
            return v
    return "pass"


def exit_code(verdict: str) -> ExitCode:
    return ExitCode.CHECK_FAILED if verdict == "fail" else ExitCode.PASS


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
    return str(n)


def _jsonable(obj):
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if isinstance(obj, (set, tuple)):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    return str(obj)
