"""Typed records: what crosses a module boundary (a rank's result, a session's outcome, a measurement's
results, a check row, a whole report), as frozen dataclasses with one JSON codec (codec.py).

The HTML report, `compare` and the terminal read records, never raw dicts. Records import nothing of the
platform, the lab or the reports (scripts/import_graph.py): which Config and results classes a command's report
holds is the lab's knowledge (catalog.types_for), handed to ``core.Report.from_json``, so that any report
ddplab wrote is rebuilt and validated (a crafted file is refused before anything renders it).
"""

from __future__ import annotations

from .codec import RecordError
from .core import SCHEMA_VERSION, Check, Report, Verdict, make_report

__all__ = ["SCHEMA_VERSION", "Check", "RecordError", "Report", "Verdict", "make_report"]
