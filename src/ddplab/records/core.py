"""What every record shares: the verdict scale, a check row, and the JSON envelope every command writes.

The envelope's top-level keys are a public contract (users' CI parses them):
    schema_version, command, config, platform, results, verdict
plus informative extras (ddplab_version, created_utc, argv). Bump SCHEMA_VERSION when a key changes meaning or
disappears; adding keys does not bump it.
"""

from __future__ import annotations

import contextvars
import dataclasses
import datetime
import enum
import inspect
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable

from .. import __version__
from ..redaction import redact_argv
from .codec import MISSING, RecordError, from_json, parts_typed, to_json

SCHEMA_VERSION = 1
# The catalog a report is read with: types_for(command, where) -> (Config class, results class, platform class).
# Records name no command's types (the lab's registry does: measurements.types_for); a report nested in another
# (a lab's stage) is read with its parent's catalog.
_TYPES_FOR: contextvars.ContextVar = contextvars.ContextVar("ddplab_report_types", default=None)


class Verdict(str, enum.Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"  # could not run here: recorded, not judged

    @staticmethod
    def worst(verdicts: Iterable["Verdict"]) -> "Verdict":
        """FAIL over WARN over PASS; SKIP counts as nothing (a lab of skipped stages passes)."""
        seen = {Verdict(v) for v in verdicts}
        for v in (Verdict.FAIL, Verdict.WARN):
            if v in seen:
                return v
        return Verdict.PASS

    @property
    def exit_code(self) -> int:
        from ..errors import ExitCode

        return int(ExitCode.CHECK_FAILED if self is Verdict.FAIL else ExitCode.PASS)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Check:
    """One row of the verdict table: the number, the threshold, what it means and what to do next."""

    check: str
    verdict: Verdict
    value: str
    threshold: str
    meaning: str
    next_step: str
    stage: str = ""


@dataclass(frozen=True)
class Report:
    """The JSON document of one command: its config, the platform, the results record and the verdict; and the
    check rows that verdict is the worst of, as the lab judged them (``checks``: derived, never written; None
    where nobody judged the report, e.g. one read back and not judged again)."""

    command: str
    config: Any
    platform: Any
    results: Any
    verdict: Verdict
    schema_version: int = SCHEMA_VERSION
    ddplab_version: str = __version__
    created_utc: str = field(default_factory=lambda: datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds"))
    argv: tuple[str, ...] = field(default_factory=lambda: tuple(sys.argv[1:]))
    checks: tuple[Check, ...] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        # The command line travels with the report (JSON, HTML, terminal): a secret typed on it never does.
        object.__setattr__(self, "argv", tuple(redact_argv(self.argv)))

    def to_json(self) -> dict:
        return {
            "schema_version": self.schema_version,
            "command": self.command,
            "config": to_json(self.config),
            "platform": to_json(self.platform),
            "results": to_json(self.results),
            "verdict": self.verdict.value,
            "ddplab_version": self.ddplab_version,
            "created_utc": self.created_utc,
            "argv": list(self.argv),
        }

    @classmethod
    def from_json(cls, data: Any, where: str = "$", types_for=None) -> "Report":
        """Read and validate a report written by any ddplab command (RecordError names the first bad field), with
        the catalog ``types_for`` (measurements.report_from_json hands it the lab's)."""
        from .parts import report_parts

        types_for = types_for or _TYPES_FOR.get()
        if types_for is None:
            raise TypeError("Report.from_json needs the catalog of report types: use measurements.report_from_json")
        if not isinstance(data, dict):
            raise RecordError(where, "a ddplab report (a JSON object)", data)
        token = _TYPES_FOR.set(types_for)
        try:
            with parts_typed(report_parts()):
                return cls._from_json(data, where, types_for)
        finally:
            _TYPES_FOR.reset(token)

    @classmethod
    def _from_json(cls, data: dict, where: str, types_for) -> "Report":
        version = from_json(int, data.get("schema_version", MISSING), f"{where}.schema_version")
        if version > SCHEMA_VERSION:
            raise RecordError(f"{where}.schema_version", f"a version up to {SCHEMA_VERSION}", version)
        command = from_json(str, data.get("command", MISSING), f"{where}.command")
        config_cls, results_cls, platform_cls = types_for(command, where=f"{where}.command")
        platform = data.get("platform")
        platform = None if platform is None else from_json(platform_cls, platform, f"{where}.platform")
        return cls(
            command=command,
            config=from_json(config_cls, data.get("config", MISSING), f"{where}.config"),
            platform=platform,
            results=_with_platform(from_json(results_cls, data.get("results", MISSING), f"{where}.results"),
                                   platform),
            verdict=from_json(Verdict, data.get("verdict", MISSING), f"{where}.verdict"),
            schema_version=version,
            ddplab_version=from_json(str, data.get("ddplab_version", ""), f"{where}.ddplab_version"),
            created_utc=from_json(str, data.get("created_utc", ""), f"{where}.created_utc"),
            argv=tuple(from_json(list[str], data.get("argv") or [], f"{where}.argv")),
        )


def rows_of(report: Report) -> list[Check]:
    """A report's check rows: as the lab judged them (``Report.checks``), else a record's that judges itself
    (launch, clean; compare's take the report's config: its tolerance and smallest size judged), else none."""
    if report.checks is not None:
        return list(report.checks)
    own = getattr(report.results, "checks", None)
    if not callable(own):
        return []
    return own(report.config) if inspect.signature(own).parameters else own()


def _with_platform(results: Any, platform: Any) -> Any:
    """A record that keeps its machine beside its results (a ``platform`` field the envelope writes at the top
    level) gets it back, so its checks judge the same record that was written."""
    if platform is None or not dataclasses.is_dataclass(results) or \
            "platform" not in {f.name for f in dataclasses.fields(results)}:
        return results
    return dataclasses.replace(results, platform=platform)
