"""Frozen dataclasses <-> JSON, validated on the way in.

``to_json(obj)`` turns a record into plain JSON values; ``from_json(cls, data)`` builds it back and checks every field
it reads: a missing key or a wrong type raises ``RecordError`` naming the path (``$.results.ranks[1].pid``), what was
expected and what was found, so `ddplab report` and `compare` refuse a crafted or damaged document before rendering.

Field metadata understood here (``dataclasses.field(metadata=...)``):
  ``flatten``   - a nested dataclass whose keys are written into the parent object (keys the parent wrote win); an
                  Optional one reads back as None when none of its keys are there. A ``dict`` or ``Any`` field with
                  ``flatten`` reads back the object's remaining keys (an open-ended part).
  ``omit_none`` - leave the key out when the value is None.
  ``omit_default`` - leave the key out at the field's default (an option added later keeps earlier documents' keys).
  ``json_name`` - the key in JSON when it differs from the field name.
  ``skip``      - never written (e.g. the platform, which the report envelope writes at its top level).
  ``omit_with`` - another field's name: this one is written (null included) exactly when that one is not None.
  ``expect``    - (what it must be, predicate): a value read back must also pass the predicate.
  ``keys``      - an open ``dict[str, ...]`` whose known keys have types of their own: {key: type}.
A record that refuses its values on construction is a RecordError at its path. A derived field (``init=False``) is
not read, but must have its type. An open part only its holder can type is checked through its holder's
``json_parts()``, {(class, field): type}, key by key (a missing key is no error), and keeps its JSON value.
Unknown keys are ignored, so a newer ddplab's report still loads; keys added since schema 1 have defaults, and a
``json_upgrade(data) -> data`` static method rewrites what earlier versions spelt differently.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import enum
import math
import types
import typing
from functools import lru_cache
from typing import Any, Union

from ..basics.cli_options import default_of
from ..errors import DdplabError

# The open parts' types the records being read declared (json_parts): (class, field) -> type.
_PARTS: contextvars.ContextVar[dict] = contextvars.ContextVar("ddplab_json_parts", default={})
# Set while an open part is checked: its values must have their types, a key it lacks is no error, nothing is built.
_CHECKING_PART: contextvars.ContextVar[bool] = contextvars.ContextVar("ddplab_checking_part", default=False)


class RecordError(ValueError):
    """A JSON document does not have the shape a record needs."""

    def __init__(self, path: str, expected: str, got: object):
        self.path, self.expected = path, expected
        self.missing = got is MISSING
        self.value = None if self.missing else got  # the bad value itself, for messages in the user's terms
        self.got = _describe(got)
        super().__init__(f"{path}: expected {expected}, got {self.got}")


# The field metadata most records use (see the module's docstring).
FLATTEN = {"flatten": True}
OMIT = {"omit_none": True}
OMIT_DEFAULT = {"omit_default": True}
SKIP = {"skip": True}


# ---------------------------------------------------------------------------------------- writing

def to_json(obj: Any) -> Any:
    if obj is None or isinstance(obj, (str, bool, int, float)):
        return obj
    if isinstance(obj, enum.Enum):
        return obj.value
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if hasattr(obj, "to_json"):  # a record that writes itself (core.Report: its parts' types vary)
            return obj.to_json()
        out: dict = {}
        for f in dataclasses.fields(obj):
            meta = f.metadata
            value = getattr(obj, f.name)
            if meta.get("skip") or (value is None and meta.get("omit_none")) \
                    or (meta.get("omit_default") and value == default_of(f)) \
                    or ("omit_with" in meta and getattr(obj, meta["omit_with"]) is None):
                continue
            if meta.get("flatten"):
                # Keys already written win: a flattened record never overwrites its parent's own fields.
                for k, v in (to_json(value) or {}).items():
                    out.setdefault(k, v)
            else:
                out[meta.get("json_name", f.name)] = to_json(value)
        return out
    if isinstance(obj, dict):
        return {str(k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_json(v) for v in obj]
    if hasattr(obj, "__fspath__"):
        return str(obj)
    raise TypeError(f"cannot write {type(obj).__name__} as JSON")


# ---------------------------------------------------------------------------------------- reading

@contextlib.contextmanager
def setting(var: contextvars.ContextVar, value):
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


def parts_typed(parts: dict):
    """Check the open parts {(class, field): type} inside whatever is read in this block (as ``json_parts``)."""
    return setting(_PARTS, {**_PARTS.get(), **parts})


def from_json(tp: Any, data: Any, path: str = "$") -> Any:
    """Build ``tp`` (a dataclass, or any type annotation this module understands) from JSON values."""
    if tp is Any or tp is object:
        return data
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        if data is None and type(None) in args:
            return None
        others = [a for a in args if a is not type(None)]
        errors = []
        for a in others:
            try:
                return from_json(a, data, path)
            except RecordError as exc:
                errors.append(exc)
        if len(errors) == 1:
            raise errors[0]
        raise RecordError(path, " or ".join(_name(a) for a in args), data)
    if origin is typing.Literal:
        if data not in args:
            raise RecordError(path, f"one of {list(args)}", data)
        return data
    if origin in (list, tuple, set, frozenset) or tp in (list, tuple):
        if not isinstance(data, list):
            raise RecordError(path, "a list", data)
        if origin is tuple and args and args[-1] is not Ellipsis:  # a fixed tuple (tuple[X, ...] reads as a list does)
            if len(args) != len(data):
                raise RecordError(path, f"a list of {len(args)} values", data)
            return tuple(from_json(a, v, f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, data)))
        item = args[0] if args else Any
        values = [from_json(item, v, f"{path}[{i}]") for i, v in enumerate(data)]
        return tuple(values) if origin is tuple else values
    if origin is dict or tp is dict:
        if not isinstance(data, dict):
            raise RecordError(path, "an object", data)
        kt, vt = args if args else (str, Any)
        return {_key(kt, k, path): from_json(vt, v, f"{path}.{k}") for k, v in data.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        if issubclass(tp, str) and not isinstance(data, str):
            raise RecordError(path, "a string", data)
        try:
            return tp(data)
        except ValueError:
            raise RecordError(path, f"one of {[m.value for m in tp]}", data) from None
    if dataclasses.is_dataclass(tp) and hasattr(tp, "from_json"):  # reads itself (core.Report)
        return tp.from_json(data, path)
    if dataclasses.is_dataclass(tp):
        if not isinstance(data, dict):
            raise RecordError(path, f"an object ({tp.__name__})", data)
        return _read_dataclass(tp, data, path)
    return _read_scalar(tp, data, path)


def _read_dataclass(cls: type, data: dict, path: str) -> Any:
    with parts_typed(getattr(cls, "json_parts", dict)()):
        return _read_dataclass_fields(cls, data, path)


def _read_dataclass_fields(cls: type, data: dict, path: str) -> Any:
    upgrade = getattr(cls, "json_upgrade", None)
    if upgrade is not None:  # a record that reads what earlier versions wrote (e.g. a flag that was a bool)
        data = upgrade(data)
    kwargs = {}
    hints = _hints(cls)
    parts = _PARTS.get()
    used: set[str] = set()
    extras_field = None
    for f in dataclasses.fields(cls):
        meta = f.metadata
        if meta.get("skip"):
            continue
        tp = hints[f.name]
        key = meta.get("json_name", f.name)
        if not f.init:  # derived by the record: not read back, but the document's value must be of its type
            if key in data and not meta.get("flatten"):
                from_json(tp, data[key], f"{path}.{key}")
            continue
        if meta.get("flatten"):
            if typing.get_origin(tp) is dict or tp in (dict, Any):
                extras_field = f  # an open object: the keys no other field claimed
                continue
            inner = _dataclass_of(tp)
            if inner is None:
                raise TypeError(f"flatten needs a dataclass, not {tp!r}")
            used |= _keys_of(inner)
            if _optional(tp):
                # An optional part that was not written reads back as None (e.g. the summary of a run that
                # failed): none of the keys it cannot be read without (or, having none, none of its keys).
                required = _required_keys(inner)
                if not (required or _keys_of(inner)) & data.keys():
                    kwargs[f.name] = None
                    continue
            kwargs[f.name] = _read_dataclass(inner, data, path)
            continue
        used.add(key)
        if key not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING \
                    and not _CHECKING_PART.get():
                raise RecordError(f"{path}.{key}", f"a value ({_name(tp)})", MISSING)
            continue
        kwargs[f.name] = _read_field(tp, data[key], f"{path}.{key}", meta)
        part = parts.get((cls, f.name))
        if part is not None and data[key] is not None:
            _check_part(part, data[key], f"{path}.{key}")
    if extras_field is not None:
        kwargs[extras_field.name] = {k: v for k, v in data.items() if k not in used}
        part = parts.get((cls, extras_field.name))
        if part is not None and _keys_of(part) & kwargs[extras_field.name].keys():
            _check_part(part, data, path)  # the whole object: the part's keys may be shared with its holder's
    if _CHECKING_PART.get():
        return data  # checked, not built
    try:
        return cls(**kwargs)
    except DdplabError as exc:  # e.g. a Config whose validation refuses a value: name the field it refused
        name = exc.reference.removeprefix("invalid-").replace("-", "_")
        field_names = {f.name: f.metadata.get("json_name", f.name) for f in dataclasses.fields(cls)}
        if name in field_names and field_names[name] in data:
            raise RecordError(f"{path}.{field_names[name]}", f"a valid value ({exc.message})",
                              data[field_names[name]]) from None
        raise RecordError(path, f"a valid {cls.__name__} ({exc.message})", data) from None


def _check_part(tp: Any, data: Any, path: str) -> None:
    """``data`` as an open part of type ``tp``: every value it holds of its type, missing keys allowed."""
    with setting(_CHECKING_PART, True):
        from_json(tp, data, path)


def _read_field(tp: Any, data: Any, path: str, meta) -> Any:
    if "keys" in meta:  # an open object whose known keys have types of their own
        value = from_json(tp, data, path)
        value.update({k: from_json(t, data[k], f"{path}.{k}") for k, t in meta["keys"].items() if k in data})
        return value
    expect = meta.get("expect")
    if expect is None:
        return from_json(tp, data, path)
    what, holds = expect
    try:
        value = from_json(tp, data, path)
    except RecordError as err:
        if err.path == path:
            raise RecordError(path, what, data) from None
        raise
    if value is not None and not holds(value):
        raise RecordError(path, what, data)
    return value


# A JSON scalar by the type that reads it: what it must be, and whether a value is one.
_SCALARS = {
    bool: ("true or false", lambda v: isinstance(v, bool)),
    int: ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    float: ("a finite number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)),
    str: ("a string", lambda v: isinstance(v, str)),
    type(None): ("null", lambda v: v is None),
}


def _read_scalar(tp: Any, data: Any, path: str) -> Any:
    if tp not in _SCALARS:
        raise TypeError(f"{path}: no JSON reader for {tp!r}")
    what, holds = _SCALARS[tp]
    if not holds(data):
        raise RecordError(path, what, data)
    return float(data) if tp is float else data


def _key(kt: Any, key: str, path: str) -> Any:
    if kt is int:
        try:
            return int(key)
        except ValueError:
            raise RecordError(f"{path}.{key}", "an integer key", key) from None
    return key


def _dataclass_of(tp: Any) -> type | None:
    """The dataclass ``tp`` is, or the first one it unites (an Optional part); None if there is none."""
    return next((a for a in (tp, *typing.get_args(tp)) if dataclasses.is_dataclass(a)), None)


@lru_cache(maxsize=None)
def _hints(cls: type) -> dict:
    return typing.get_type_hints(cls)


@lru_cache(maxsize=None)
def _keys_of(cls: type) -> frozenset:
    keys = set()
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if f.metadata.get("skip"):
            continue
        inner = _dataclass_of(hints[f.name]) if f.metadata.get("flatten") else None
        if inner is not None:
            keys |= _keys_of(inner)
        else:
            keys.add(f.metadata.get("json_name", f.name))
    return frozenset(keys)


def _optional(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType) and type(None) in typing.get_args(tp)


@lru_cache(maxsize=None)
def _required_keys(cls: type) -> frozenset:
    """The keys a dataclass cannot be read without (its own fields without a default)."""
    return frozenset(f.metadata.get("json_name", f.name) for f in dataclasses.fields(cls)
                     if f.init and not f.metadata.get("skip") and not f.metadata.get("flatten")
                     and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)


class MISSING:
    """What a caller passes for a key the document lacks: RecordError then says "missing"."""


def _name(tp: Any) -> str:
    if tp is type(None):
        return "null"
    if isinstance(tp, type):
        return {"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false"}.get(
            tp.__name__, tp.__name__)
    return str(tp).replace("typing.", "")


def _describe(value: object) -> str:
    if value is MISSING:
        return "nothing (the key is missing)"
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    text = repr(value)
    kind = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)
    return f"{kind} {text[:60]}{'...' if len(text) > 60 else ''}"
