"""What every record shares: the verdict scale, a check row, and the JSON envelope every command writes.

The envelope's top-level keys are a public contract (users' CI parses them):
    schema_version, command, config, platform, results, verdict
plus informative extras (ddplab_version, created_utc, argv). Bump SCHEMA_VERSION when a key changes meaning or
disappears; adding keys does not bump it.

What a results record may offer beyond its data, declared (``typing.Protocol``) rather than looked up by name, so
that a typo in a method's name is a type error, not a silent miss.

    Drawn         figures(stage) -> the charts and tables report.html draws
    HasTimedRows  timed_rows(config) -> the rows `ddplab compare` lines up (TimedRow)
    StartsRuns    run_ids() -> the run ids it started (the lab's leftover check looks for their processes)
    Staged        stage_verdicts() -> each stage's verdict (compared stage by stage)
    InSession     session: the SessionRecord of the ranks it ran
    OnMachine     platform: the machine it ran on (written at the report's top)
    Interruptible interrupted: whether a stop signal cut it short

And what ``make_report`` may ask of a kind (measurements/__init__.py): ``Kind`` and ``ChoosesAtRun``.
"""

from __future__ import annotations

import contextvars
import dataclasses
import datetime
import enum
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol, runtime_checkable

from .. import __version__
from ..errors import ExitCode
from ..basics.redaction import redact_argv
from .codec import MISSING, OMIT, RecordError, from_json, parts_typed, setting, to_json
from .session import report_parts

SCHEMA_VERSION = 1
ORPHANS_CHECK = "orphaned processes"  # the row that counts them, wherever a survey is judged (env, clean, check)
# The catalog a report is read with: types_for(command, where) -> (Config class, results class, platform class).
# Records name no command's types (the lab's registry does: catalog.types_for); a report nested in another
# (a lab's stage) is read with its parent's catalog.
_TYPES_FOR: contextvars.ContextVar = contextvars.ContextVar("ddplab_report_types", default=None)


@runtime_checkable
class Drawn(Protocol):
    def figures(self, stage: str) -> list: ...


@dataclass(frozen=True)
class TimedRow:
    op: str
    size_bytes: int
    in_place: bool
    time_us: float
    busbw_gbps: float | None = None
    num_wrong: int | None = field(default=None, metadata=OMIT)

    @property
    def key(self) -> tuple[str, int, bool]:
        return self.op, self.size_bytes, self.in_place


@runtime_checkable
class HasTimedRows(Protocol):
    def timed_rows(self, config: Any) -> list: ...


@runtime_checkable
class StartsRuns(Protocol):
    def run_ids(self) -> Iterable[str]: ...


@runtime_checkable
class Staged(Protocol):
    def stage_verdicts(self) -> dict: ...


@runtime_checkable
class InSession(Protocol):
    session: Any


@runtime_checkable
class OnMachine(Protocol):
    platform: Any


@runtime_checkable
class Interruptible(Protocol):
    interrupted: bool


@runtime_checkable
class Kind(Protocol):
    NAME: str
    SUMMARY: str
    Config: type
    Record: type

    def run(self, config: Any, observer: Any = None) -> Any: ...

    def checks(self, record: Any) -> list: ...

    def summary(self, record: Any) -> str: ...


@runtime_checkable
class ChoosesAtRun(Protocol):
    def config_as_run(self, config: Any, record: Any) -> Any: ...


class Verdict(str, enum.Enum):
    """ddplab's one vocabulary, the same word in the terminal, the page, the JSON and `check`'s records."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"  # could not run here: recorded, not judged
    INFO = "info"  # a measurement shown for what it is: nothing was held against it

    @property
    def severity(self) -> int:
        """The one order of verdicts: FAIL over WARN over PASS; SKIP and INFO (nothing judged) weigh as much as a
        pass. A verdict got worse when its severity rose (`ddplab compare`)."""
        return {Verdict.PASS: 0, Verdict.SKIP: 0, Verdict.INFO: 0, Verdict.WARN: 1, Verdict.FAIL: 2}[self]

    @staticmethod
    def worst(verdicts: Iterable["Verdict"]) -> "Verdict":
        """The most severe; SKIP and INFO count as nothing (a lab of skipped stages passes)."""
        top = max((Verdict(v) for v in verdicts), key=lambda v: v.severity, default=Verdict.PASS)
        return top if top.severity else Verdict.PASS

    @property
    def exit_code(self) -> int:
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
    """The JSON document of one command: config, platform, results and verdict; and the check rows the verdict is the
    worst of (``checks``: never written; None where nobody judged the report, e.g. one read back)."""

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
        written = [f.name for f in dataclasses.fields(self) if f.name not in ("schema_version", "checks")]
        return {"schema_version": self.schema_version, **{name: to_json(getattr(self, name)) for name in written}}

    @classmethod
    def from_json(cls, data: Any, where: str = "$", types_for=None) -> "Report":
        """Read and validate a report of any command with ``types_for`` (RecordError names the first bad field)."""
        types_for = types_for or _TYPES_FOR.get()
        if types_for is None:
            raise TypeError("Report.from_json needs the catalog of report types: use catalog.report_from_json")
        if not isinstance(data, dict):
            raise RecordError(where, "a ddplab report (a JSON object)", data)
        with setting(_TYPES_FOR, types_for), parts_typed(report_parts()):
            version = from_json(int, data.get("schema_version", MISSING), f"{where}.schema_version")
            if version > SCHEMA_VERSION:
                raise RecordError(f"{where}.schema_version", f"a version up to {SCHEMA_VERSION}", version)
            command = from_json(str, data.get("command", MISSING), f"{where}.command")
            config_cls, results_cls, platform_cls = types_for(command, where=f"{where}.command")
            platform = data.get("platform")
            platform = None if platform is None else from_json(platform_cls, platform, f"{where}.platform")
            config = from_json(config_cls, data.get("config", MISSING), f"{where}.config")
            return cls(
                command=command,
                config=config,
                platform=platform,
                results=_with_envelope(from_json(results_cls, data.get("results", MISSING), f"{where}.results"),
                                       platform=platform, config=config),
                verdict=from_json(Verdict, data.get("verdict", MISSING), f"{where}.verdict"),
                schema_version=version,
                ddplab_version=from_json(str, data.get("ddplab_version", ""), f"{where}.ddplab_version"),
                created_utc=from_json(str, data.get("created_utc", ""), f"{where}.created_utc"),
                argv=tuple(from_json(list[str], data.get("argv") or [], f"{where}.argv")),
            )


def make_report(kind, config: Any, record: Any) -> Report:
    """The report of one run of a kind: its config as it ran, the machine, its record and the one verdict rule, the
    worst of the kind's checks. Every report is made here; one read back is judged by the same rule (catalog.judged)."""
    if isinstance(kind, ChoosesAtRun):
        config = kind.config_as_run(config, record)
    checks = tuple(kind.checks(record))
    return Report(command=kind.NAME, config=config, platform=platform_of(record), results=record,
                  verdict=Verdict.worst(c.verdict for c in checks), checks=checks)


def verdict_of(kind, record: Any) -> Verdict:
    return Verdict.worst(c.verdict for c in kind.checks(record))


def platform_of(record: Any) -> Any:
    """The machine a record was measured on: its own, or its session's (None when read back from JSON)."""
    own = record.platform if isinstance(record, OnMachine) else None
    session = record.session if isinstance(record, InSession) else None
    return own or (session.platform if isinstance(session, OnMachine) else None)


def rows_of(report: Report) -> list[Check]:
    """A report's check rows: as the lab judged them (``Report.checks``), else a record's that judges itself
    (launch, clean, compare: it keeps the config it is judged with), else none."""
    if report.checks is not None:
        return list(report.checks)
    own = getattr(report.results, "checks", None)
    if isinstance(own, (list, tuple)):  # a record whose rows are data (a check's node checks)
        return list(own)
    return own() if callable(own) else []


def _with_envelope(results: Any, **parts: Any) -> Any:
    """Give a record back what the envelope writes at its top level (``platform``, a comparison's ``config``), so
    that its checks judge the same record that was written."""
    if not dataclasses.is_dataclass(results):
        return results
    names = {f.name for f in dataclasses.fields(results)}
    kept = {name: value for name, value in parts.items() if name in names and value is not None}
    return dataclasses.replace(results, **kept) if kept else results
