"""Reading a ddplab JSON document back: the file, its encoding, and the shape of every field
that `ddplab report` (html_report.py) and `ddplab compare` read.

Such a document may come from another machine, another ddplab version or anyone's editor.
Each field those readers use is checked here, with its path, before anything uses it: a
wrong document is refused with exit 2 naming the file, the first bad field and what it
must be, instead of a traceback halfway through rendering. Fields nobody reads back are
not checked, so documents stay free to grow (report.py: adding keys does not bump
SCHEMA_VERSION).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable

from .errors import UsageError
from .report import SCHEMA_VERSION


class SchemaError(Exception):
    def __init__(self, path: str, expected: str, value=None, missing: bool = False):
        super().__init__(path)
        self.path, self.expected, self.value, self.missing = path, expected, value, missing

    def describe(self) -> str:
        if self.missing:
            return f"field {self.path} is missing; it must be {self.expected}"
        return f"field {self.path} must be {self.expected}, but it is {_show(self.value)}"


def _show(value) -> str:
    """The bad value as the user will recognise it: its JSON spelling, cut short."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = json.dumps(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"the string {text}" if isinstance(value, str) else text


# --------------------------------------------------------------------------- the spec language

class Spec:
    def check(self, value, path: str) -> None:
        raise NotImplementedError


class Leaf(Spec):
    """A value of one kind, e.g. "a finite number"."""

    def __init__(self, expected: str, accepts: Callable[[object], bool]):
        self.expected, self.accepts = expected, accepts

    def check(self, value, path):
        if not self.accepts(value):
            raise SchemaError(path, self.expected, value)


class Nullable(Spec):
    def __init__(self, spec: Spec):
        self.spec = spec

    def check(self, value, path):
        if value is not None:
            try:
                self.spec.check(value, path)
            except SchemaError as err:
                if err.path == path:  # the value itself is wrong: say null was fine too
                    err.expected += " or null"
                raise


class ListOf(Spec):
    def __init__(self, item: Spec):
        self.item = item

    def check(self, value, path):
        if not isinstance(value, list):
            raise SchemaError(path, "a list", value)
        for i, v in enumerate(value):
            self.item.check(v, f"{path}[{i}]")


class Obj(Spec):
    """A JSON object: ``required`` keys must be present, ``optional`` ones may be missing.
    Other keys are allowed (documents grow)."""

    def __init__(self, required: dict[str, Spec] | None = None, optional: dict[str, Spec] | None = None):
        self.required, self.optional = required or {}, optional or {}

    def check(self, value, path):
        if not isinstance(value, dict):
            raise SchemaError(path, "an object", value)
        for key, spec in self.required.items():
            if key not in value:
                raise SchemaError(_join(path, key), _expected(spec), missing=True)
            spec.check(value[key], _join(path, key))
        for key, spec in self.optional.items():
            if key in value:
                spec.check(value[key], _join(path, key))


class When(Spec):
    """``spec`` applies only when ``condition(value)`` holds (the reader uses those fields then)."""

    def __init__(self, condition: Callable[[dict], bool], spec: Spec):
        self.condition, self.spec = condition, spec

    def check(self, value, path):
        if self.condition(value):
            self.spec.check(value, path)


class Rule(Spec):
    """A relation between fields, e.g. one more histogram count than bin edges."""

    def __init__(self, field: str, expected: str, holds: Callable[[dict], bool]):
        self.field, self.expected, self.holds = field, expected, holds

    def check(self, value, path):
        if not self.holds(value):
            raise SchemaError(_join(path, self.field), self.expected, value.get(self.field))


class AllOf(Spec):
    def __init__(self, *specs: Spec):
        self.specs = specs

    def check(self, value, path):
        for spec in self.specs:
            spec.check(value, path)


class ByCommand(Spec):
    """The part of a document that depends on its command (storm, sweep, ...)."""

    def __init__(self, table: dict[str, Spec]):
        self.table = table

    def check(self, value, path):
        spec = self.table.get(value.get("command"))
        if spec is not None:
            spec.check(value, path)


class Lazy(Spec):
    """A spec defined later (a run's stages hold whole documents)."""

    def __init__(self, get: Callable[[], Spec]):
        self.get = get

    def check(self, value, path):
        self.get().check(value, path)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _expected(spec: Spec) -> str:
    if isinstance(spec, Leaf):
        return spec.expected
    if isinstance(spec, Nullable):
        return _expected(spec.spec) + " or null"
    return {ListOf: "a list", Obj: "an object"}.get(type(spec), "present")


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


NUMBER = Leaf("a finite number", _is_number)
POSITIVE = Leaf("a number > 0", lambda v: _is_number(v) and v > 0)
COUNT = Leaf("a number >= 0", lambda v: _is_number(v) and v >= 0)
INT = Leaf("a whole number", lambda v: isinstance(v, int) and not isinstance(v, bool))
STR = Leaf("a string", lambda v: isinstance(v, str))
BOOL = Leaf("true or false", lambda v: isinstance(v, bool))
SCALAR = Leaf("a string, number, true/false or null",
              lambda v: v is None or isinstance(v, (str, bool)) or _is_number(v))
VERSION = Leaf(f"a whole number from 1 to {SCHEMA_VERSION} (this ddplab's schema)",
               lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= SCHEMA_VERSION)


# --------------------------------------------------------------------------- what the readers read

PLATFORM = Nullable(Obj(optional={
    "devices": ListOf(Obj(optional={"name": SCALAR})),
    **{k: SCALAR for k in ("hostname", "device_count", "vendor", "torch_version", "collective_library",
                           "collective_loaded_version")},
}))

CHECK_ROW = Obj(required={"verdict": STR, **{k: SCALAR for k in ("stage", "check", "value", "threshold",
                                                                   "meaning", "next_step")}})

STAGE = Obj(required={"name": STR, "verdict": STR},
            optional={"command": SCALAR, "summary": SCALAR, "duration_s": Nullable(NUMBER),
                      "report": Nullable(Lazy(lambda: STAGE_DOCUMENT))})

# Every document: html_report reads these from whatever document it is given.
COMMON_RESULTS = Obj(optional={"profile": SCALAR, "duration_s": NUMBER, "interrupted": SCALAR,
                               "checks": ListOf(CHECK_ROW), "stages": ListOf(STAGE), "completed": SCALAR})

HISTOGRAM = AllOf(
    Obj(required={"counts": ListOf(COUNT), "edges_us": ListOf(NUMBER)}),
    Rule("edges_us", "a non-empty list", lambda h: len(h["edges_us"]) > 0),
    Rule("counts", "one count more than edges_us (below the first edge, between edges, above the last)",
         lambda h: len(h["counts"]) == len(h["edges_us"]) + 1),
)

STORM = AllOf(
    Obj(required={"results": Obj(optional={"per_op_histogram": Nullable(HISTOGRAM), "backend": SCALAR})}),
    When(lambda d: bool(d["results"].get("per_op_histogram")),
         Obj(required={"results": Obj(required={"threshold_us": NUMBER, "mean_us": NUMBER,
                                                "per_op_us": Obj(required={"n": SCALAR})})})),
    When(lambda d: d["results"].get("completed") is True,  # compare: the storm's mean at its size
         Obj(required={"config": Obj(required={"bytes": POSITIVE}),
                       "results": Obj(required={"mean_us": NUMBER})})),
)

SWEEP_ROW = AllOf(
    Obj(required={"op": STR},
        optional={"size_bytes": POSITIVE, "in_place": BOOL, "time_us": Nullable(NUMBER),
                  "busbw_gbps": Nullable(NUMBER), "algbw_gbps": Nullable(NUMBER), "num_wrong": Nullable(NUMBER)}),
    When(lambda r: bool(r.get("time_us")) or r.get("busbw_gbps") is not None or r.get("algbw_gbps") is not None,
         Obj(required={"size_bytes": POSITIVE, "in_place": BOOL})),
)

SWEEP = Obj(required={"results": Obj(required={"rows": ListOf(SWEEP_ROW)},
                                     optional={"ceiling": Nullable(Obj(required={"gbps": POSITIVE})),
                                               **{k: SCALAR for k in ("world_size", "backend", "mode", "dtype")}})})

SAMPLE = Obj(required={"t_s": NUMBER, "ranks": ListOf(Obj(
    required={"rank": INT}, optional={"device_mem_bytes": Nullable(COUNT), "rss_bytes": Nullable(COUNT)}))})

TRAIN = AllOf(
    Obj(required={"results": Obj(optional={"timeseries": Nullable(Obj(optional={
        "samples": Nullable(ListOf(SAMPLE)), "interval_s": SCALAR, "method": SCALAR}))})}),
    When(lambda d: d["results"].get("completed") is True,  # compare: the step time
         Obj(required={"results": Obj(required={"step_time_us": Obj(required={"p50": NUMBER})})})),
)

DRILL = Obj(required={"drill": STR, "verdict": STR},
            optional={"detect_s": Nullable(COUNT), "injected": Nullable(Obj(optional={"what": SCALAR})),
                      "detected_by": SCALAR, "leaked_pids": Nullable(ListOf(SCALAR))})

BY_COMMAND = ByCommand({
    "storm": STORM,
    "sweep": SWEEP,
    "train": TRAIN,
    "drill": Obj(required={"results": Obj(required={"drills": ListOf(DRILL)})}),
})


def _document(top_level: bool) -> Spec:
    keys = {"command": STR, "verdict": STR, "results": COMMON_RESULTS}
    if top_level:  # a stage's own report is checked as part of the run's document
        keys["schema_version"] = VERSION
    return AllOf(Obj(required=keys, optional={"platform": PLATFORM, "created_utc": SCALAR}), BY_COMMAND)


DOCUMENT = _document(top_level=True)
STAGE_DOCUMENT = _document(top_level=False)


# --------------------------------------------------------------------------- reading a file

def read_bytes(path: str) -> bytes:
    p = Path(path)
    if not p.is_file():
        raise UsageError("no-such-file", f"{path} is not a file")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise UsageError("unreadable-file", f"{path} cannot be read: {exc.strerror or exc}") from None
    if not data.strip():
        raise UsageError("empty-file", f"{path} is empty")
    return data


def looks_like_json(data: bytes) -> bool:
    return data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"[")


def parse_document(data: bytes, path: str) -> dict:
    """Decode (UTF-8), parse (JSON) and check a ddplab document; UsageError says what is wrong."""
    if b"\0" in data:
        raise UsageError("unreadable-report", f"{path} is a binary file, not a ddplab JSON report")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError("unreadable-report", f"{path} is not UTF-8 text: byte 0x{data[exc.start]:02x} at offset "
                                              f"{exc.start} cannot be decoded") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError("unreadable-report", f"{path} is not JSON: {exc.msg} at line {exc.lineno}, column "
                                              f"{exc.colno}") from None
    except RecursionError:
        raise UsageError("unreadable-report", f"{path} nests JSON too deeply to be a ddplab report") from None
    check_document(doc, path)
    return doc


def check_document(doc, source: str) -> None:
    """Refuse (exit 2) a document any reader would trip over, naming the first bad field."""
    try:
        if not isinstance(doc, dict):
            raise SchemaError("(document)", "a JSON object (a ddplab report)", doc)
        DOCUMENT.check(doc, "")
    except SchemaError as err:
        raise UsageError("invalid-report", f"{source}: {err.describe()}",
                         hint="the file is not a ddplab report as this version writes it") from None
    except RecursionError:
        raise UsageError("invalid-report", f"{source}: stages nest reports too deeply") from None


def read_document(path: str) -> dict:
    return parse_document(read_bytes(path), path)
