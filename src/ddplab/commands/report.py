"""Render a report's HTML page again from its JSON alone (a report from another machine, or last
week's), after checking every field it uses: a file that is not a ddplab report exits 2. --baseline draws another
run or nccl-tests output dashed beside this report's lines; a launch report also gets its flight records as a
trace-event file beside the page.

`ddplab report`: the document is read through the records (reading/catalog.py); --baseline is read as `ddplab
compare` reads its A side.
"""

from __future__ import annotations

import argparse
from pathlib import Path

SUMMARY = "re-render report.html from a report.json"
EXAMPLES = (  # shown by --help (commands.help_epilog)
    ("ddplab report ddplab-runs/run-x/report.json", "report.html again, beside the JSON"),
    ("ddplab report new.json --baseline old.json --out both.html", "this run with another, dashed, on one page"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..basics.cli_options import help_text, path_argument

    parser.add_argument("report", metavar="REPORT_JSON", help=help_text("a report.json written by `ddplab run` "
                                                                        "(or any command's --json)", None))
    parser.add_argument("--out", metavar="PATH", default=None, type=path_argument("--out"),
                        help=help_text("HTML file to write", "beside the JSON"))
    parser.add_argument("--baseline", metavar="FILE", default=None, type=path_argument("--baseline"),
                        help=help_text("draw this run beside a baseline: a ddplab JSON report or nccl-tests text "
                                       "output", "none"))


def validate(args) -> None:
    from ..reading.catalog import read_report

    read_report(args.report)
    if args.baseline:
        from ..reading.comparison import load_baseline

        load_baseline(args.baseline)


def main(args, console) -> int:
    from ..report.terminal import stopped_exit_code
    from ..errors import printable
    from ..report.page import write_page
    from ..reading.catalog import read_report

    report = read_report(args.report)
    baseline = None
    if args.baseline:  # a baseline's reader, only for a page that draws one
        from ..reading.comparison import load_baseline

        baseline = load_baseline(args.baseline)
    out = Path(args.out) if args.out else Path(args.report).with_suffix(".html")
    for path in write_page(report, out, baseline=baseline, base_dir=Path(args.report).parent):
        console.print(f"wrote {printable(str(path))}", markup=False, highlight=False)
    return stopped_exit_code(0)
