"""Put two sets of collective timings side by side, nccl-tests text output or ddplab JSON reports,
and exit 1 when B is slower than A beyond the tolerance or a stage's verdict got worse.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..basics import cli_options
from ..reading import comparison
from ..measurements import spikes
from ..errors import UsageError, printable
from ..records import Report, make_report
from ..records.compare import CompareConfig, CompareRecord, ComparedRow, MissingRow
from ..basics.sizes import human
from . import options

SUMMARY = comparison.SUMMARY
EXAMPLES = (  # shown by --help (commands.help_epilog)
    ("ddplab compare nccl-tests.txt sweep.json", "nccl-tests' output beside a ddplab sweep"),
    ("ddplab compare old.json new.json --tolerance 10% --html diff.html", "two runs, and a page with both"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_config_arguments(parser, CompareConfig, json="also write the comparison as JSON here")
    parser.add_argument("--html", metavar="PATH", default=None, type=cli_options.path_argument("--html"),
                        help=cli_options.help_text("write the comparison as a page: per collective, time and busbw "
                                                   "against size, A dashed beside B", "none"))


def config_from_args(args) -> CompareConfig:
    config = options.config_from_args(CompareConfig, args)
    for path in (config.old, config.new):
        if not Path(path).is_file():
            raise UsageError("no-such-file", f"{path} is not a file")
    if args.html:
        from ..basics.files import check_output_file

        check_output_file(args.html, "--html")
    return config


validate = config_from_args


def main(args, console) -> int:
    config = config_from_args(args)
    old, new = comparison.load_input(config.old), comparison.load_input(config.new)  # kept: they label the table
    report = make_report(comparison, config, comparison.compare(config, old, new))
    if args.html:
        from ..report.page import write_page

        write_page(report, args.html)
    return options.finish(report, lambda rep, out: render(rep, old.label, new.label, out), args, console)


def render(report: Report, old_label: str, new_label: str, console) -> None:
    record: CompareRecord = report.results
    config: CompareConfig = report.config
    console.print(table_text(record.rows, old_label, new_label), markup=False, highlight=False, soft_wrap=True)
    for c in record.verdict_changes:
        console.print(f"verdict of stage {printable(c.stage)} changed: {c.old.value.upper()} -> {c.new.value.upper()}",
                      markup=False, highlight=False)
    if record.missing_stages:
        console.print(f"stage(s) of A missing from B: {printable(', '.join(record.missing_stages))}", markup=False,
                      highlight=False, soft_wrap=True)
    for line in missing_text(record.missing_rows):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    spiked = record.spikes(config.min_size)
    if spiked:
        console.print(f"{len(spiked)} spike(s) in B, not counted as slower: {spikes.FINDING}")
    missing = (f", {len(record.missing_rows)} row(s) and {len(record.missing_stages)} stage(s) of A missing from B"
               if record.missing_rows or record.missing_stages else "")
    console.print(f"{len(record.rows)} rows compared, {len(record.regressions)} slower than A by more than "
                  f"{100 * config.tolerance:g}%, {len(spiked)} spike(s) in B, {len(record.wrong)} with wrong data "
                  f"in B, {len(record.verdict_changes)} verdict(s) worse{missing}: {report.verdict.value.upper()}",
                  markup=False, highlight=False, soft_wrap=True)


MAX_SIZES_SHOWN = 8


def missing_text(rows: list[MissingRow]) -> list[str]:
    """A's rows that B lacks, one line per collective and placement, the sizes in A's order."""
    series: dict[tuple[str, bool, bool], list[int]] = {}
    for m in rows:
        series.setdefault((m.op, m.in_place, m.loss), []).append(m.size_bytes)
    lines = []
    for (op, in_place, loss), sizes in series.items():
        shown = ", ".join(human(s) for s in sizes[:MAX_SIZES_SHOWN])
        more = f" and {len(sizes) - MAX_SIZES_SHOWN} more size(s)" if len(sizes) > MAX_SIZES_SHOWN else ""
        why = "missing from B" if loss else "not timed by B's tool at any size (a warning)"
        lines.append(f"{printable(op)} {'in' if in_place else 'out-of'}-place at {shown} bytes{more}: {why}")
    return lines


def table_text(rows: list[ComparedRow], old_label: str, new_label: str) -> str:
    lines = [f"# A = {printable(old_label)}   B = {printable(new_label)}   "
             "(time in us, busbw in GB/s, change = B/A - 1)",
             f"# {'op':<14} {'size (B)':>12} {'place':>6} {'A time':>10} {'B time':>10} {'change':>8} "
             f"{'A busbw':>8} {'B busbw':>8}"]
    for r in rows:
        flag = "  <- slower" if r.regression else ""
        if r.spike:
            flag = f"  <- spike in B: {r.spike_factor:.1f}x its neighbours"
        lines.append(f"  {printable(r.op):<14} {r.size_bytes:>12} {'in' if r.in_place else 'out':>6} "
                     f"{r.old_time_us:>10.2f} {r.new_time_us:>10.2f} {100 * r.time_change:>7.1f}% "
                     f"{_bw(r.old_busbw_gbps)} {_bw(r.new_busbw_gbps)}{flag}")
    return "\n".join(lines)


def _bw(v) -> str:
    return f"{v:>8.2f}" if v is not None else f"{'n/a':>8}"
