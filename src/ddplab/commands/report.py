"""`ddplab report report.json [--out report.html]`: render the HTML page again from the
JSON alone (a report from another machine, or last week's), after reading every field it
uses through the records (records/load.py): a file that is not a ddplab report exits 2."""

from __future__ import annotations

import argparse
from pathlib import Path

SUMMARY = "re-render report.html from a report.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("report", metavar="REPORT_JSON", help="a report.json written by `ddplab run` (or any "
                                                              "command's --json)")
    parser.add_argument("--out", default=None, help="HTML file to write (default: beside the JSON)")


def validate(args) -> None:
    from ..records.load import read_report

    read_report(args.report)


def main(args, console) -> int:
    from ..errors import printable
    from ..files import write_text_atomic
    from ..html_report import render_html
    from ..records.load import read_report

    report = read_report(args.report)
    out = Path(args.out) if args.out else Path(args.report).with_suffix(".html")
    write_text_atomic(out, render_html(report))
    console.print(f"wrote {printable(str(out))}", markup=False, highlight=False)
    return 0
