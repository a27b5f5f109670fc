"""Expectations as data: a TOML file of bounds per machine type (examples/fleet/thresholds.toml shows every key),
read with tomllib (tomli on Python 3.10). The first [[machine]] entry that matches the node is used; its busbw
entries are floors (GB/s), its latency entries ceilings (us), each with a warning and a critical bound.

A file ddplab cannot use is refused before anything starts (exit 2), naming the file, the key and what is valid.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass
from pathlib import Path

from ..errors import EnvironmentUnsupported, UsageError
from ..basics.sizes import human, parse_size
from .plan import OPS, every_sweep_size
from .record import MachineType

ANY = "*"
LARGEST = "largest"
QUANTILES = ("mean", "p50", "p90", "p99", "max")
MACHINE_KEYS = ("device", "count", "library", "busbw", "latency")
BUSBW_KEYS = ("op", "size", "warning", "critical")
LATENCY_KEYS = ("quantile", "warning", "critical")
MAX_BOUND = 1e9  # GB/s or us: a bound this large is a typo


@dataclass(frozen=True)
class Bound:
    """One expectation on one number: bounds and their severity, and where it was written."""

    metric: str  # "busbw" (a floor, GB/s), "latency" (a ceiling, us) or "copy_ceiling" (a floor, GB/s: baselines)
    warning: float | None
    critical: float | None
    where: str  # "FILE machine[0].busbw[1]", or "baseline FILE"
    op: str = ANY  # busbw: a collective or ANY
    size: int | None = None  # busbw: bytes; None: the largest size measured
    quantile: str = "mean"  # latency
    in_place: bool | None = None  # busbw: one placement only (a baseline's row); None: every placement measured

    @property
    def floor(self) -> bool:
        return self.metric in ("busbw", "copy_ceiling")


@dataclass(frozen=True)
class MachineEntry:
    device: str
    count: int | None  # None: any
    library: str
    bounds: tuple[Bound, ...]
    where: str

    def matches(self, machine: MachineType) -> bool:
        return (fnmatch.fnmatchcase(machine.device.lower(), self.device.lower())
                and (self.count is None or self.count == machine.count)
                and fnmatch.fnmatchcase(machine.library.lower(), self.library.lower()))

    def describe(self) -> str:
        return f'device "{self.device}", count {self.count if self.count is not None else ANY}, ' \
               f'library "{self.library}"'


@dataclass(frozen=True)
class Thresholds:
    path: str
    entries: tuple[MachineEntry, ...]

    def for_machine(self, machine: MachineType) -> MachineEntry | None:
        """The first entry that matches the node (file order: specific entries first, catch-alls last)."""
        return next((e for e in self.entries if e.matches(machine)), None)


def toml():
    """The standard library's TOML reader, or on Python 3.10 its backport (a dependency there, pyproject.toml)."""
    try:
        import tomllib
    except ModuleNotFoundError:
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise EnvironmentUnsupported("toml-reader-missing", "--thresholds: this Python has no tomllib (3.11+) "
                                                                "and tomli is not installed",
                                         hint="pip install tomli (or install ddplab with pip, which does)") from None
    return tomllib


def load(path: str) -> Thresholds:
    """Read and check a thresholds file; UsageError (exit 2) names the file, the key and what is valid."""
    tomllib = toml()
    p = Path(path)
    if not p.is_file():
        raise UsageError("invalid-thresholds", f"--thresholds {path} is not a file")
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError("invalid-thresholds", f"--thresholds {path} cannot be read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError("invalid-thresholds", f"{path} is not TOML: {exc}") from None
    return parse(doc, path)


def parse(doc: dict, path: str) -> Thresholds:
    _keys(doc, ("machine",), path, "(top level)")
    machines = doc.get("machine")
    if not isinstance(machines, list) or not machines:
        _refuse(path, "machine", "is missing or not a list of tables",
                "one or more [[machine]] tables, each with device, count, library and its bounds")
    return Thresholds(path, tuple(_machine(m, path, f"machine[{i}]") for i, m in enumerate(machines)))


def _machine(entry, path: str, key: str) -> MachineEntry:
    if not isinstance(entry, dict):
        _refuse(path, key, "is not a table", "a [[machine]] table")
    _keys(entry, MACHINE_KEYS, path, key)
    device = _pattern(entry.get("device", ANY), path, f"{key}.device")
    library = _pattern(entry.get("library", ANY), path, f"{key}.library")
    count = entry.get("count", ANY)
    if count == ANY:
        count = None
    elif isinstance(count, bool) or not isinstance(count, int) or count < 1:
        _refuse(path, f"{key}.count", f"is {count!r}", 'a whole number of devices (1 or more), or "*"')
    bounds = [*(_busbw(b, path, f"{key}.busbw[{i}]") for i, b in enumerate(_tables(entry, "busbw", path, key))),
              *(_latency(b, path, f"{key}.latency[{i}]") for i, b in enumerate(_tables(entry, "latency", path, key)))]
    if not bounds:
        _refuse(path, key, "has no bounds", "one or more [[machine.busbw]] or [[machine.latency]] tables")
    return MachineEntry(device, count, library, tuple(bounds), f"{path} {key}")


def _busbw(table: dict, path: str, key: str) -> Bound:
    _keys(table, BUSBW_KEYS, path, key)
    op = table.get("op", ANY)
    if op != ANY and op not in OPS:
        _refuse(path, f"{key}.op", f"is {op!r}", f"{', '.join(OPS)} or \"*\"")
    size = table.get("size", LARGEST)
    if size != LARGEST:
        valid = every_sweep_size()
        try:
            size = parse_size(str(size))
        except UsageError:
            size = None
        if size not in valid:
            _refuse(path, f"{key}.size", f"is {table.get('size')!r}, a size the check's sweep does not run",
                    f'"{LARGEST}", or one of ' + ", ".join(human(s) for s in valid))
    warning, critical = _bounds(table, path, key, "GB/s")
    if warning is not None and critical is not None and critical > warning:
        _refuse(path, f"{key}.critical", f"is {critical:g}, above warning {warning:g}",
                "a busbw floor: critical <= warning (lower busbw is worse)")
    return Bound("busbw", warning, critical, f"{path} {key}", op=op, size=None if size == LARGEST else size)


def _latency(table: dict, path: str, key: str) -> Bound:
    _keys(table, LATENCY_KEYS, path, key)
    quantile = table.get("quantile", "mean")
    if quantile not in QUANTILES:
        _refuse(path, f"{key}.quantile", f"is {quantile!r}", ", ".join(QUANTILES))
    warning, critical = _bounds(table, path, key, "us")
    if warning is not None and critical is not None and critical < warning:
        _refuse(path, f"{key}.critical", f"is {critical:g}, below warning {warning:g}",
                "a latency ceiling: critical >= warning (higher latency is worse)")
    return Bound("latency", warning, critical, f"{path} {key}", op="all_reduce", quantile=quantile)


def _bounds(table: dict, path: str, key: str, unit: str) -> tuple[float | None, float | None]:
    values = []
    for name in ("warning", "critical"):
        value = table.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or not 0 < value <= MAX_BOUND):
            _refuse(path, f"{key}.{name}", f"is {value!r}", f"a number of {unit} above 0 (up to {MAX_BOUND:g})")
        values.append(None if value is None else float(value))
    if values == [None, None]:
        _refuse(path, key, "has neither warning nor critical", f"warning = N and/or critical = N ({unit})")
    return values[0], values[1]


def _tables(entry: dict, name: str, path: str, key: str) -> list[dict]:
    tables = entry.get(name, [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        _refuse(path, f"{key}.{name}", "is not a list of tables", f"[[machine.{name}]] tables")
    return tables


def _pattern(value, path: str, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        _refuse(path, key, f"is {value!r}", 'a name with optional shell wildcards, e.g. "NVIDIA H200*", or "*"')
    return value


def _keys(table: dict, valid: tuple[str, ...], path: str, key: str) -> None:
    for name in table:
        if name not in valid:
            where = name if key == "(top level)" else f"{key}.{name}"
            _refuse(path, where, "is not a key ddplab knows", ", ".join(valid))


def _refuse(path: str, key: str, problem: str, valid: str):
    raise UsageError("invalid-thresholds", f"{path}: {key} {problem}; valid: {valid}")
