"""The one place a value becomes HTML: every value reaches a page through ``h()``, which escapes all of them
(numbers too); only ``Markup`` (fragments ``h()`` built from the templates of page.py and its drawing
modules) is inserted as is, and anything else handed to ``concat()`` is escaped as text. A value interpolated any
other way (an f-string, ``+``) is a plain string, which ``concat()`` escapes: an unescaped value cannot reach the
page by omission. tests/unit/test_page.py checks that every template is a literal.
"""

from __future__ import annotations

import html
import json
import string
from typing import Iterable

VERDICT_CLASS = {"pass": "pass", "warn": "warn", "fail": "fail", "skip": "skip", "info": "info"}


class Markup(str):
    """HTML this module wrote itself: inserted as is. Everything else is escaped."""


class _EscapingFormatter(string.Formatter):
    def format_field(self, value, format_spec):
        if isinstance(value, Markup):
            if format_spec:
                raise ValueError("markup takes no format spec")
            return value
        return html.escape(format(value, format_spec), quote=True)


_FORMATTER = _EscapingFormatter()


def h(template: str, *args, **kwargs) -> Markup:
    """The one way markup is built here: ``template`` is this module's own HTML, and every
    value put into it is escaped after formatting (``{x:.1f}`` formats, then escapes),
    unless it is Markup that h() built."""
    return Markup(_FORMATTER.vformat(template, args, kwargs))


def concat(parts: Iterable, lines: bool = False) -> Markup:
    """Fragments joined (one per line when ``lines``); a part that is not Markup is escaped as text."""
    return Markup(("\n" if lines else "").join(p if isinstance(p, Markup) else html.escape(str(p), quote=True)
                                                for p in parts))


def json_for_script(doc: dict) -> str:
    """The document as JSON that cannot end its <script> element: "</script", "<!--" and
    "-->" need < and >, which JSON spells as \\u003c / \\u003e inside strings (the only place
    they can occur); & likewise. ensure_ascii writes U+2028/2029 as \\u escapes too."""
    text = json.dumps(doc, default=str, ensure_ascii=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def badge(verdict) -> Markup:
    verdict = str(verdict)
    return h("<span class='badge {}'>{}</span>", VERDICT_CLASS.get(verdict, ""), verdict.upper())
