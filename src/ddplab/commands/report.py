"""`ddplab report report.json [--out report.html]`: render the HTML page again from the
JSON alone (a report from another machine, or last week's)."""

from __future__ import annotations

import argparse
from pathlib import Path

SUMMARY = "re-render report.html from a report.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("report", metavar="REPORT_JSON", help="a report.json written by `ddplab run`")
    parser.add_argument("--out", default=None, help="HTML file to write (default: beside the JSON)")


def load(path: str) -> dict:
    """The report, read and checked field by field (report_schema.py); UsageError otherwise."""
    from ..report_schema import read_document

    return read_document(path)


def validate(args) -> None:
    load(args.report)


def main(args, console) -> int:
    from ..files import write_text_atomic
    from ..html_report import render_html

    doc = load(args.report)
    out = Path(args.out) if args.out else Path(args.report).with_suffix(".html")
    write_text_atomic(out, render_html(doc))
    console.print(f"wrote {out}")
    return 0
