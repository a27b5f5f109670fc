"""Reports to render in the page tests (unit and browser): the real quick CPU lab report, the same lab with
failures put in (the order they appear in says nothing: the page must lead with them), a real hung
`ddplab launch` job with its flight records, and the text a reader sees on a page."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
QUICK = FIXTURES / "report-quick-cpu.json"
HANG = FIXTURES / "launch-hang" / "report.json"  # examples/user_deadlock.py on CPU: rank 1 never arrives
NCCL_TESTS = FIXTURES / "all_reduce_perf_2xH200_nccl2.28.9.txt"
# What a page must never show a reader: a value that was never filled in.
PLACEHOLDERS = re.compile(r"\b(None|null|nan|NaN|n/a)\b")


def failing_lab_doc() -> dict:
    """The quick lab report with two failures late in the page's order: the contention stage crashed (no report)
    and the leftover check found a process of the lab still alive."""
    doc = json.loads(QUICK.read_text())
    stages = doc["results"]["stages"]
    contention = next(s for s in stages if s["name"] == "contention")
    contention.pop("report")
    contention.update(verdict="fail", summary="ChildFailedError: rank 1 exited with SIGKILL")
    leftovers = next(s for s in stages if s["name"] == "leftovers")
    leftovers.update(verdict="fail", left_pids=[4242], summary="1 process(es) of this lab and 0 orphan(s) left")
    doc["verdict"] = "fail"
    return doc


def write_doc(doc: dict, path: Path) -> Path:
    path.write_text(json.dumps(doc))
    return path



class _Text(HTMLParser):
    """The page's text as a reader gets it: no <script>, <style> or <title>; collapsed sections included."""

    def __init__(self):
        super().__init__()
        self.hidden, self.parts = 0, []

    def handle_starttag(self, tag, attrs):
        self.hidden += tag in ("script", "style", "title")

    def handle_endtag(self, tag):
        self.hidden -= tag in ("script", "style", "title")

    def handle_data(self, data):
        if not self.hidden:
            self.parts.append(data)


def page_text(page: str) -> str:
    parser = _Text()
    parser.feed(page)
    return " ".join(parser.parts)


def placeholders(text: str) -> list[str]:
    """Each placeholder with the words around it, for a readable failure."""
    return [text[max(0, m.start() - 60):m.end() + 20] for m in PLACEHOLDERS.finditer(text)]
