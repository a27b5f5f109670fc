"""Crafted report.json documents: payloads put into every field of a real report, read back through the
records (which refuse a value of the wrong type, naming the field), and the checks that a rendered page
carries no live script.

Every leaf of the real quick-profile report (tests/fixtures) is a candidate, not just the ones today's
renderer shows, so a field the renderer starts showing tomorrow is covered without editing a list here.
"""

from __future__ import annotations

import copy
import json
import re
from html.parser import HTMLParser
from pathlib import Path

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "report-quick-cpu.json"

PAYLOADS = (
    "<script>alert(1)</script>",
    "\"><img src=x onerror=alert(1)>",
    "'><svg onload=alert(1)>",
    "&lt;script&gt;alert(1)&lt;/script&gt;",  # live once something unescapes it into markup
    "<img src=x onerror=&#x61;&#x6c;&#x65;&#x72;&#x74;(1)>",  # still calls alert after .upper()
)

Field = tuple  # a leaf's place in the document: its keys and list indices


def load_fixture() -> dict:
    return json.loads(FIXTURE.read_text())


def leaves(doc, path: tuple = ()) -> dict[Field, list[Field]]:
    """Every scalar leaf of ``doc``, grouped by kind: the field with list indices as "*" -> its places."""
    kinds: dict[Field, list[Field]] = {}

    def walk(node, place):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, place + (k,))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, place + (i,))
        else:
            kinds.setdefault(tuple("*" if isinstance(p, int) else p for p in place), []).append(place)

    walk(doc, path)
    return kinds


def read_back(doc: dict):
    """The crafted document as `ddplab report` reads it: a Report, or the UsageError that refuses it."""
    from ddplab.reading.catalog import parse_report

    return parse_report(json.dumps(doc).encode(), "crafted.json")


def with_value(doc: dict, places: list[Field], value) -> dict:
    """A copy of ``doc`` with the leaf at each of ``places`` set to ``value``."""
    out = copy.deepcopy(doc)
    for place in places:
        node = out
        for key in place[:-1]:
            node = node[key]
        node[place[-1]] = value
    return out


def dotted(field: Field) -> str:
    """The records' spelling of a field (reading/catalog.py): results.stages[*].name."""
    text = ""
    for p in field:
        text += f"[{p}]" if p == "*" or isinstance(p, int) else (f".{p}" if text else p)
    return text


def names_field(message: str, field: Field) -> bool:
    pattern = re.escape(dotted(field)).replace(r"\[\*\]", r"\[\d+\]")
    return re.search(rf"field {pattern}(?![\w.\[])", message) is not None


class _Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.script_text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.script_text.append(data)


def assert_inert(page: str, doc: dict) -> None:
    """No script but the JSON data block, no event handler attribute, and the data block is
    the report's document, intact (nothing in it closed the element early)."""
    parsed = _Page()
    parsed.feed(page)
    parsed.close()
    scripts = [attrs for tag, attrs in parsed.tags if tag == "script"]
    assert scripts == [{"type": "application/json", "id": "report-data"}], scripts
    handlers = [(tag, name) for tag, attrs in parsed.tags for name in attrs if name.lower().startswith("on")]
    assert handlers == [], handlers
    lowered = page.lower()
    assert lowered.count("<script") == 1, "a <script appears outside the JSON data block"
    assert "<img" not in lowered and "<svg onload" not in lowered
    assert json.loads("".join(parsed.script_text)) == json.loads(json.dumps(doc))
