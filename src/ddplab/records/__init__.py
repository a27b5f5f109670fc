"""Typed records: what crosses a module boundary, as frozen dataclasses with one JSON codec (codec.py). The HTML
report, `compare` and the terminal read records, never raw dicts. Records import nothing of the platform, the lab or
the reports: which classes a report holds is handed to ``core.Report.from_json`` (catalog.types_for), so any report
ddplab wrote is rebuilt and validated, and a crafted file is refused before anything renders it.
"""

from __future__ import annotations

from .codec import RecordError
from .core import SCHEMA_VERSION, Check, Report, Verdict, make_report

__all__ = ["SCHEMA_VERSION", "Check", "RecordError", "Report", "Verdict", "make_report"]
