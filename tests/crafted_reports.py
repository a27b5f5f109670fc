"""Crafted report.json documents: which fields the HTML renderer reads, payloads put into
them, and the checks that a rendered page carries no live script.

The fields are found by rendering the real quick-profile report (tests/fixtures) through
dicts and lists that record every value read from them, so a field the renderer starts
reading tomorrow is covered without editing a list here.
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


class _ReadDict(dict):
    def __init__(self, data: dict, path: tuple, reads: set):
        super().__init__({k: _track(v, path + (k,), reads) for k, v in data.items()})
        self._path, self._reads = path, reads

    def _seen(self, key, value):
        if not isinstance(value, (dict, list)):
            self._reads.add(self._path + (key,))
        return value

    def __getitem__(self, key):
        return self._seen(key, super().__getitem__(key))

    def get(self, key, default=None):
        return self._seen(key, super().get(key, default)) if key in self else default

    def items(self):
        return [(k, self._seen(k, v)) for k, v in super().items()]

    def values(self):
        return [self._seen(k, v) for k, v in super().items()]


class _ReadList(list):
    def __init__(self, data: list, path: tuple, reads: set):
        super().__init__(_track(v, path + (i,), reads) for i, v in enumerate(data))
        self._path, self._reads = path, reads

    def __getitem__(self, index):
        value = super().__getitem__(index)
        if isinstance(index, int) and not isinstance(value, (dict, list)):
            self._reads.add(self._path + (index % len(self),))
        return value

    def __iter__(self):
        for i, value in enumerate(super().__iter__()):
            if not isinstance(value, (dict, list)):
                self._reads.add(self._path + (i,))
            yield value


def _track(value, path, reads):
    if isinstance(value, dict):
        return _ReadDict(value, path, reads)
    if isinstance(value, list):
        return _ReadList(value, path, reads)
    return value


def fields_the_renderer_reads(doc: dict, monkeypatch) -> dict[Field, list[Field]]:
    """Every leaf render_html reads, grouped by kind: the field with list indices as "*"
    -> the places in ``doc`` where the renderer read it."""
    from ddplab import html_report

    reads: set = set()
    # The JSON data block serialises the whole document; that is not the renderer reading a field.
    with monkeypatch.context() as patch:
        patch.setattr(html_report, "json_for_script", lambda d: "{}")
        html_report.render_html(_track(doc, (), reads))
    kinds: dict[Field, list[Field]] = {}
    for place in sorted(reads, key=str):
        kinds.setdefault(tuple("*" if isinstance(p, int) else p for p in place), []).append(place)
    return kinds


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
    """report_schema's spelling of a field: results.stages[*].name."""
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
    the document itself, intact (nothing in it closed the element early)."""
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
