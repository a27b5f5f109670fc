"""Typed records: what crosses a module boundary (a rank's result, a session's outcome, a measurement's
results, a check row, a whole report), as frozen dataclasses with one JSON codec (codec.py).

The HTML report, `compare` and the terminal read records, never raw dicts. ``types_for(command)`` gives the
Config and results classes of a command's report, so ``core.Report.from_json`` can rebuild and validate any
report ddplab wrote (issue 10: a crafted file is refused before anything renders it).
"""

from __future__ import annotations

from .codec import RecordError
from .core import SCHEMA_VERSION, Check, Report, Verdict, make_report

__all__ = ["SCHEMA_VERSION", "Check", "RecordError", "Report", "Verdict", "make_report", "register_report_type",
           "types_for"]

# Reports that are not of a kind (ddplab.measurements: the measurements, the lab, launch, clean, compare).
_REPORT_TYPES: dict[str, tuple[str, str, str, str]] = {
    # command: (config module, config class, results module, results class)
    "check": ("ddplab.check.config", "CheckConfig", "ddplab.check.record", "CheckRecord"),
}


def register_report_type(command: str, config_cls: type, results_cls: type) -> None:
    _REGISTERED[command] = (config_cls, results_cls)


_REGISTERED: dict[str, tuple[type, type]] = {}


def types_for(command: str, where: str = "$.command") -> tuple[type, type]:
    """(Config class, results class) of a command's report; RecordError for a command ddplab never wrote."""
    import importlib

    if command not in _REGISTERED:
        from .. import measurements

        if command in measurements.kinds():
            kind = measurements.get(command)
            return kind.Config, kind.Record
        if command in _REPORT_TYPES:
            config_module, config_name, results_module, results_name = _REPORT_TYPES[command]
            return (getattr(importlib.import_module(config_module), config_name),
                    getattr(importlib.import_module(results_module), results_name))
        known = sorted(set(measurements.kinds()) | set(_REPORT_TYPES) | set(_REGISTERED))
        raise RecordError(where, f"a ddplab command ({', '.join(known)})", command)
    return _REGISTERED[command]
