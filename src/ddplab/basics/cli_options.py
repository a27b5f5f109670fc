"""Each Config field says how the command line spells it; from that and from the field's type, default and
docstring this module makes the command's argparse options, reads them back into the Config, checks the
field's declared choices and range, and writes the command line that gives the Config back (``argv_of``).

So an option is written once, as a field of its Config:

    steps: int = option("--steps", default=20, range=Range(1, MAX_STEPS))
    \"\"\"Optimizer steps per rank.\"\"\"

Its help is the first paragraph of its docstring (the string under the field, read with ``ast`` as Sphinx reads
attribute docstrings: where the reader of the code sees it, not a copy to drift from; a later paragraph is for
developers), then "(default: 20)" unless the docstring says its default. A field's spelling (its metadata under
``KEY``) is a ``Value``, ``Switch``, ``OneOf`` or ``Nested``, or any object with Value's methods (add, read, argv,
check), as sizes.SizeRange spells one field as -b/-e/-f.

An option not given is absent from the namespace (argparse.SUPPRESS): only what the user typed reaches the Config,
whose own defaults fill the rest, so the parser has no default of its own to drift. A name a lower layer cannot
list (the vendor table's device types and backends) is a ``Vocabulary``, whose names the command layer defines.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import re
import textwrap
import types
import typing
from dataclasses import MISSING, dataclass, field
from typing import Any, Callable

from ..errors import UsageError
from .validators import argv_text, check_choice, check_number, check_path_text, read_number

KEY = "cli"
# An option whose value names a file or a directory says so in its metavar, and is read as a path
# (validators.check_path_text: never empty, never longer than the kernel takes).
PATH_METAVARS = frozenset({"DIR", "FILE", "PATH", "REPORT"})
# A docstring that says its own default ("...; default: off", "by default ...") keeps its words; any other gets
# "(default: X)".
DEFAULT_SAID = re.compile(r"\bdefault\b", re.IGNORECASE)


@dataclass(frozen=True)
class Range:
    """The numbers a field accepts (validators.check_number: the same words for every option)."""

    low: float
    high: float
    name: str | None = None  # shown as a comparison, "0 < seconds <= 86400", needed when an end is open
    low_open: bool = False
    high_open: bool = False
    unit: str = ""
    reference: str | None = None  # the error's name, when the flag's own would not do ("-n": invalid-iters)

    def check(self, value, flag: str, integer: bool) -> None:
        check_number(value, flag, self.low, self.high, integer=integer, name=self.name, low_open=self.low_open,
                     high_open=self.high_open, unit=self.unit, reference=self.reference)


@dataclass(frozen=True)
class Vocabulary:
    """Names a lower layer cannot list; the command layer defines them (``define_vocabulary``)."""

    name: str


_VOCABULARIES: dict[str, Callable[[], tuple[str, ...]]] = {}


def define_vocabulary(name: str, names: Callable[[], tuple[str, ...]]) -> None:
    _VOCABULARIES[name] = names


def names_of(choices) -> tuple[str, ...] | None:  # KeyError: the command layer did not define it (a bug)
    return tuple(_VOCABULARIES[choices.name]()) if isinstance(choices, Vocabulary) else choices


@dataclass(frozen=True)
class Slot:
    """One field as the parser sees it: its name, where argparse puts it (``dest``), its default and its help."""

    name: str
    dest: str
    default: Any  # MISSING: required
    doc: str
    scalar: type  # int, float, str or bool: what argparse converts the text to
    optional: bool = False  # None is a value of its own ("off", "chosen when it runs")


@dataclass(frozen=True)
class Value:
    """An option with a value (``flags``; the first is the one messages and ``argv_of`` use), or, without
    flags, a positional argument."""

    flags: tuple[str, ...] = ()
    choices: tuple[str, ...] | Vocabulary | None = None
    range: Range | None = None
    parse: Callable[[str, str], Any] | None = None  # (text, flag) -> value, UsageError when it is not one
    show: Callable[[Any], str] = argv_text  # value -> its text on the command line and in the help
    metavar: str | None = None
    repeat: bool = False  # may be given several times: the field holds a tuple of them
    hidden: bool = False
    listed: Callable[[], Any] | None = None  # names the help lists, where ``parse`` checks them (drills, collectives)

    def flag_of(self, slot: Slot) -> str:
        return self.flags[0] if self.flags else slot.name

    def add(self, parser, slot: Slot) -> None:
        names = names_of(self.choices)
        long = self.flags[-1].lstrip("-").upper().replace("-", "_") if self.flags else None
        metavar = self.metavar or ("|".join(names) if isinstance(self.choices, tuple) else long)
        listed = tuple(self.listed()) if self.listed else names if isinstance(self.choices, Vocabulary) else None
        doc = slot.doc + (f" One of: {', '.join(listed)}." if listed else "")
        default = (None if slot.default is MISSING or self.repeat else "none" if slot.default is None
                   else self.show(slot.default))
        helped = argparse.SUPPRESS if self.hidden else help_text(doc, default)
        if not self.flags:
            parser.add_argument(slot.dest, metavar=self.metavar or slot.name.upper(), help=helped)
            return
        # Every value reaches ``read`` as typed: numbers are read there with the digits 0-9 only
        # (validators.read_number), which argparse's int and float do not hold to ("٢" is 2 to them).
        parser.add_argument(*self.flags, dest=slot.dest, default=argparse.SUPPRESS, type=str, help=helped,
                            metavar=metavar, action="append" if self.repeat else "store")

    def read(self, args, slot: Slot):
        if not hasattr(args, slot.dest):
            return MISSING
        raw = getattr(args, slot.dest)
        if self.repeat:
            return tuple(self._one(r, slot) for r in raw)
        return self._one(raw, slot)

    def _one(self, raw, slot: Slot):
        flag = self.flag_of(slot)
        if self.parse:
            value = self.parse(raw, flag)
        elif slot.scalar in (int, float):
            value = read_number(raw, flag, integer=slot.scalar is int, reference=self.range and self.range.reference)
        elif self.metavar in PATH_METAVARS:
            value = check_path_text(raw, flag)
        elif not raw.strip():  # an empty word would read as "not given" further on (--rdzv-host '' ran as auto)
            raise UsageError(f"invalid-{flag.lstrip('-')}", f"{flag} {raw!r} is empty; give a value, or leave {flag} "
                                                           "out for its default")
        else:
            value = raw
        if isinstance(self.choices, Vocabulary):
            check_choice(value, slot.name, names_of(self.choices))
        return value

    def argv(self, value, default) -> list[str]:
        if value == default:
            return []
        values = value if self.repeat else (value,)
        return [part for v in values for part in ([self.show(v)] if not self.flags else [self.flags[0], self.show(v)])]

    def check(self, value, slot: Slot) -> None:
        for v in (value if self.repeat else (value,)):
            if isinstance(self.choices, tuple):
                check_choice(v, slot.name, self.choices)
            if self.range is not None:
                self.range.check(v, self.flag_of(slot), slot.scalar is int)


@dataclass(frozen=True)
class Switch:
    """A boolean field: ``on`` sets it, ``off`` clears it; either may be None (only the other exists)."""

    on: str | None = None
    off: str | None = None

    def add(self, parser, slot: Slot) -> None:
        state = "on" if slot.default else "off"
        if self.on:
            parser.add_argument(self.on, dest=slot.dest, action="store_const", const=True, default=argparse.SUPPRESS,
                                help=help_text(slot.doc, state))
        if self.off:
            # An off flag alone says what it does in its own clause of the docstring ("--no-sample: ..."): the
            # docstring's first words say what the field means when it is on, the opposite of the flag.
            helped = (help_text(f"the opposite of {self.on}", self.on if slot.default else self.off) if self.on
                      else help_text(clause(slot.doc, self.off), "on" if not slot.default else "off"))
            parser.add_argument(self.off, dest=slot.dest, action="store_const", const=False,
                                default=argparse.SUPPRESS, help=helped)

    def read(self, args, slot: Slot):
        return getattr(args, slot.dest, MISSING)

    def argv(self, value, default) -> list[str]:
        return [] if value == default else [self.on if value else self.off]

    def check(self, value, slot: Slot) -> None:  # any boolean will do
        pass


@dataclass(frozen=True)
class OneOf:
    """Each value its own option, mutually exclusive (``flags``: value -> option); the default has none. The
    docstring says each value as a clause, "value: meaning", separated by semicolons: that is each one's help."""

    flags: dict[str, str]

    def add(self, parser, slot: Slot) -> None:
        group = parser.add_mutually_exclusive_group()
        default = f"{slot.default}: {clause(slot.doc, slot.default)}"
        lead = _lead(slot.doc, (slot.default, *self.flags))  # what the values are values of, said once before them
        for value, flag in self.flags.items():
            said = clause(slot.doc, value)
            group.add_argument(flag, dest=slot.dest, action="store_const", const=value, default=argparse.SUPPRESS,
                               help=help_text(f"{lead}: {said}" if lead else said, default))

    read = Switch.read  # the value its option stored, if given

    def argv(self, value, default) -> list[str]:
        return [] if value == default else [self.flags[value]]

    def check(self, value, slot: Slot) -> None:
        check_choice(value, slot.name, (slot.default, *self.flags))


@dataclass(frozen=True)
class Nested:
    """A Config inside the Config: its spelled fields are the command's options. ``help``: field name -> the
    help this command gives it instead of the field's docstring (a drill's --timeout is also its hang timeout)."""

    help: dict[str, str] = field(default_factory=dict)


def option(*flags: str, default=MISSING, default_factory=MISSING, json: dict | None = None, **spelling) -> Any:
    """A field spelt as an option with a value (``Value``): ``option("--steps", default=20, range=...)``."""
    return spelt(Value(tuple(flags), **spelling), default, default_factory, json)


def switch(on: str | None = None, off: str | None = None, *, default: bool, json: dict | None = None) -> Any:
    return spelt(Switch(on, off), default, json=json)


def one_of(flags: dict[str, str], *, default: str, json: dict | None = None) -> Any:
    return spelt(OneOf(flags), default, json=json)


def nested(default_factory: Callable[[], Any], *, help: dict[str, str] | None = None, json: dict | None = None) -> Any:
    return spelt(Nested(help or {}), default_factory=default_factory, json=json)


def spelt(spelling, default=MISSING, default_factory=MISSING, json: dict | None = None) -> Any:
    """A field with the spelling given (Value, Switch, OneOf, Nested or one of its own: sizes.SizeRange)."""
    metadata = {KEY: spelling, **(json or {})}
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=metadata)
    return field(default=default, metadata=metadata)


# ----------------------------------------------------------------------------------------- the help

def help_text(doc: str, default: str | None) -> str:
    """An option's help: the first paragraph of its docstring (what a user reads; notes for developers may follow
    a blank line) on one line, then its default unless it says it, as a sentence; "%" escaped for argparse."""
    doc = " ".join(doc.strip().split("\n\n")[0].split()).removesuffix(".")
    text = doc if default is None or DEFAULT_SAID.search(doc) else f"{doc} (default: {default})"
    return sentence(text).replace("%", "%%")


def sentence(text: str) -> str:
    """``text`` as a sentence: a capital first letter (unless it begins with a value being explained, "quick:",
    or with an option or a name as typed) and a full stop."""
    first = text.split(" ", 1)[0].rstrip(",;")
    if first.replace("-", "").isalpha() and first.islower():  # a word, not a name as typed (all_reduce, -b)
        text = text[0].upper() + text[1:]
    return text if text.endswith((".", "?", "!")) else f"{text}."


def clause(doc: str, value: str) -> str:
    """The part of a docstring that says what ``value`` means: "...; value: this; ..." -> "this"."""
    found = re.search(rf"(?:^|[;.]\s+){re.escape(value)}: ([^;]*?)\.?\s*(?:;|$)", " ".join(doc.split()))
    if found is None:
        raise LookupError(f"the docstring says nothing about {value!r} as 'value: meaning': {doc!r}")
    return found.group(1)


def _lead(doc: str, values) -> str:
    """The words of a docstring before its first "value: meaning" clause ("Where the ranks run")."""
    text = " ".join(doc.split())
    found = [m.start() for v in values for m in [re.search(rf"(?:^|(?<=[;.]\s)){re.escape(v)}: ", text)] if m]
    return text[:min(found)].strip().rstrip(".;:") if found else ""


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring (the string literal right under it in the class body); empty without the source."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    body = ast.parse(source).body[0].body
    docs = {}
    for node, after in zip(body, body[1:]):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


# ----------------------------------------------------------------------------------------- the fields

@functools.cache
def slots(cls: type) -> tuple[tuple[dataclasses.Field, Any, Slot], ...]:
    """(field, spelling, slot) of every field of ``cls`` the command line spells, in field order."""
    docs, hints = field_docs(cls), _hints(cls)
    return tuple((f, f.metadata[KEY], Slot(f.name, f.name, default_of(f), docs.get(f.name, ""),
                                          _scalar(hints[f.name]), _optional(hints[f.name])))
                 for f in dataclasses.fields(cls) if f.metadata.get(KEY) is not None and f.init)


def default_of(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default_factory is not MISSING else f.default  # MISSING: neither (required)


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except NameError:  # an annotation only a type checker resolves: read the text instead
        return {f.name: f.type for f in dataclasses.fields(cls)}


def _optional(hint) -> bool:
    if isinstance(hint, str):
        return bool(re.search(r"\bNone\b", hint))
    return type(None) in typing.get_args(hint)


def _scalar(hint) -> type:
    if isinstance(hint, str):
        return next((t for t in (bool, int, float) if re.match(rf"{t.__name__}\b", hint)), str)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    return hint if hint in (bool, int, float) else str


def check_fields(config) -> None:
    """The declared choices and range of every field (None passes where the field may be None); a Config calls
    it in ``__post_init__``, so a Config built in code is refused as its command line would be."""
    for f, spelling, slot in slots(type(config)):
        value = getattr(config, f.name)
        if not isinstance(spelling, Nested) and not (value is None and slot.optional):
            spelling.check(value, slot)


# ----------------------------------------------------------------------------------------- argparse

def path_argument(flag: str) -> Callable[[str], str]:
    """argparse's ``type`` for an option a command adds itself (not a Config field) whose value is a path: read as
    a field's path is (validators.check_path_text), refused by argparse (exit 2) with the same words."""
    def path(text: str) -> str:
        try:
            return check_path_text(text, flag)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(exc.message) from None

    path.__name__ = "path"
    return path


def add_arguments(parser: argparse.ArgumentParser, cls: type, *, base=None, helps: dict[str, str] | None = None,
                  prefix: str = "") -> None:
    """The options of every spelled field of ``cls`` (and of its nested Configs). ``base``: the instance whose
    values are the defaults (a nested Config's default); ``prefix``: put before each namespace name."""
    helps = helps or {}
    for f, spelling, slot in slots(cls):
        default = getattr(base, f.name) if base is not None else slot.default
        if isinstance(spelling, Nested):
            add_arguments(parser, type(default), base=default, helps=spelling.help, prefix=prefix)
            continue
        spelling.add(parser, dataclasses.replace(slot, dest=prefix + slot.dest, default=default,
                                                 doc=helps.get(f.name, slot.doc)))


def values_given(cls: type, args, *, prefix: str = "") -> dict[str, Any]:
    """The fields of ``cls`` the command line gave (nested Configs left out), converted and checked as far as a
    field can be alone; the Config checks the rest when it is built."""
    given = {}
    for f, spelling, slot in slots(cls):
        if isinstance(spelling, Nested):
            continue
        value = spelling.read(args, dataclasses.replace(slot, dest=prefix + slot.dest))
        if value is not MISSING:
            given[f.name] = value
    return given


def config_from_args(cls: type, args, *, resolve: Callable[[Any, dict], Any] | None = None, prefix: str = ""):
    """The Config the command line asks for. A nested Config is its default with what was given replaced;
    ``resolve(base, given)`` builds it instead where more than the command line decides (the launcher that
    started ddplab: commands/options.launch_options)."""
    kwargs = values_given(cls, args, prefix=prefix)
    for f, spelling, slot in slots(cls):
        if isinstance(spelling, Nested):
            base = slot.default
            given = values_given(type(base), args, prefix=prefix)
            kwargs[f.name] = resolve(base, given) if resolve else dataclasses.replace(base, **given)
    return cls(**kwargs)


def argv_of(config, base=None) -> list[str]:
    """The options that give ``config`` back, each left out where it is the default (``base``'s value, for a
    nested Config: its command's default, not the class's)."""
    positional: list[str] = []
    out: list[str] = []
    for f, spelling, slot in slots(type(config)):
        value = getattr(config, f.name)
        default = getattr(base, f.name) if base is not None else slot.default
        if isinstance(spelling, Nested):
            out += argv_of(value, default)
        elif isinstance(spelling, Value) and not spelling.flags:
            positional += spelling.argv(value, default)
        else:
            out += spelling.argv(value, default)
    return positional + out  # the command's words first, as people type them (`ddplab drill kill_rank --victim 1`)


def options_of(cls: type) -> list[str]:
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser, cls)
    return [s for a in parser._actions for s in a.option_strings]
