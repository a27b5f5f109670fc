"""Measure collectives as nccl-tests does, from Python: the same sizes (-b, -e, -f), byte counts, bus
factors (GB = 1e9) and column layout, so that the two outputs can be put side by side, with the results checked
at every size with exact data. Each size is measured -R times and reports the median with its spread; a size far
off its neighbours is flagged as a spike (a warning). The exit code is 1 on wrong data, or on a bus bandwidth
below --min-busbw.
"""

from __future__ import annotations

from rich.markup import escape

from .. import collectives
from ..records import library_engine
from ..measurements import spikes
from ..report import terminal
from ..measurements import sweep
from ..records import Report
from ..records.sweep import Spike, SweepRecord, SweepRow
from . import machines_view, options

SUMMARY = sweep.SUMMARY
EXAMPLES = (  # shown by --help (commands.help_epilog)
    ("ddplab sweep", "all_reduce at every power of two from 8 bytes to 64 MiB"),
    ("ddplab sweep --ops all -e 1G", "every collective, up to 1 GiB"),
    ("ddplab sweep --ops all_gather --min-busbw 100", "fail when all_gather's bus bandwidth is below 100 GB/s"),
)


def render(report: Report, console) -> None:
    r: SweepRecord = report.results
    terminal.failures(r.session, console)
    if r.library is not None:
        env = "".join(f" {k}={v}" for k, v in r.library.env.items())
        console.print(f"library engine: {escape(r.library.binding.describe())}"
                      + (f"; set{escape(env)}" if env else ""))
        for w in r.library.warnings:
            console.print(f"[yellow]library engine warning:[/] {escape(w)}")
    if r.session.completed:
        console.print(nccl_tests_table(r), markup=False, highlight=False, soft_wrap=True)
    for e in r.errors:
        console.print(f"[red]{escape(e.op)} {e.size_bytes} B in_place={e.in_place}:[/] {escape(e.error)}")
    if r.library_rows is not None and r.session.completed:
        console.print(nccl_tests_table(r, r.library_rows, f"library engine {r.library.binding.name}"
                                       if r.library else "library engine"),
                      markup=False, highlight=False, soft_wrap=True)
        for e in (row for row in r.library_rows if row.error):
            console.print(f"[red]library engine {escape(e.op)} {e.size_bytes} B in_place={e.in_place}:[/] "
                          f"{escape(e.error)}")
    if r.added_cost:
        console.print(terminal.added_cost_table(r.added_cost))
    if r.ceiling:
        best = max((x.busbw_fraction_of_ceiling or 0) for x in r.rows) if r.rows else 0
        console.print(f"device copy ceiling {r.ceiling.gbps:.1f} GB/s at {r.ceiling.size_bytes} B "
                      f"({escape(r.ceiling.method)}); best busbw reached {100 * best:.1f}% of it")
    if r.machines is not None:  # a job across machines
        console.print(*machines_view.sweep_tables(r.machines))
    terminal.footer(console, r.session, report.verdict, sweep.summary(r))


def nccl_tests_table(r: SweepRecord, rows: list[SweepRow] | None = None, engine: str | None = None) -> str:
    """The rows in nccl-tests' column layout, one block per collective (N/A where torch has no such row);
    ``rows``: another engine's rows of the same sweep (``engine`` names it), else the record's own."""
    own = rows is None
    rows = r.rows if own else rows
    lines = []
    for op in dict.fromkeys(row.op for row in rows):
        lines += _block(r, op, rows, engine or library_engine.label(r), r.spikes if own else None)
    wrong = r.num_wrong_total if own else sum(row.num_wrong or 0 for row in rows)
    lines.append(f"# Out of bounds values : {wrong} {'OK' if not wrong else 'FAILED'}")
    timed = [row.busbw_gbps for row in rows if row.busbw_gbps is not None]
    avg = r.avg_busbw_gbps if own else (sum(timed) / len(timed) if timed else None)
    lines.append(f"# Avg bus bandwidth    : {avg:.3f}" if avg is not None else "# Avg bus bandwidth    : n/a "
                                                                                 "(world size 1)")
    return "\n".join(lines)


def _block(r: SweepRecord, op: str, rows: list[SweepRow], engine: str, found: list[Spike] | None) -> list[str]:
    repeat = f", median of {r.repeat} repetitions" if r.repeat > 1 else ""
    lines = [
        f"# ddplab {op}, {r.session.world_size} ranks, backend {engine}, time: {r.mode}{repeat}",
        f"# {'':>10}  {'':>12}  {'':>6}  {'':>6}  {'':>6}  {'out-of-place':^30}  {'in-place':^30}",
        f"# {'size':>10}  {'count':>12}  {'type':>6}  {'redop':>6}  {'root':>6}  " +
        "  ".join([f"{'time':>7}  {'algbw':>6}  {'busbw':>6}  {'#wrong':>6}"] * 2),
        f"# {'(B)':>10}  {'(elements)':>12}  {'':>6}  {'':>6}  {'':>6}  " +
        "  ".join([f"{'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {'':>6}"] * 2),
    ]
    by_size: dict[int, dict[bool, SweepRow]] = {}
    unheld = []  # sizes the memory could not hold: after the table, as comments (nccl-tests parsers skip them)
    for row in rows:
        if row.op != op:
            continue
        if row.skipped is not None and row.size_bytes is None:
            lines.append(f"#  skipped: {row.skipped}")
        elif row.skipped is not None:
            unheld.append(f"#  {row.size_bytes} B {'in' if row.in_place else 'out-of'}-place skipped: {row.skipped}")
        else:
            by_size.setdefault(row.size_bytes, {})[row.in_place] = row
    redop, root = collectives.get(op).redop, collectives.get(op).root
    for size, cells in by_size.items():
        any_row = next(iter(cells.values()))
        parts = [_cell(cells.get(False)), _cell(cells.get(True))]
        lines.append(f"{size:>12}  {any_row.count:>12}  {r.dtype:>6}  {redop:>6}  {root:>6}  " + "  ".join(parts))
    lines.extend(unheld)
    for x in found or []:
        if x.op == op:  # a comment line per spike, which nccl-tests parsers skip
            around = " and ".join(f"{n.size_bytes} B {n.time_us:.2f} us" for n in x.neighbours)
            lines.append(f"# SPIKE {x.size_bytes} B {'in' if x.in_place else 'out-of'}-place: "
                         f"{x.time_us:.2f} us, {x.factor:.1f}x its neighbours ({around}): {spikes.FINDING}")
    return lines


def _cell(row: SweepRow | None) -> str:
    if row is None:
        return f"{'N/A':>7}  {'N/A':>6}  {'N/A':>6}  {'N/A':>6}"
    if row.error:
        return f"{'ERROR':>7}  {'':>6}  {'':>6}  {'':>6}"
    busbw = f"{row.busbw_gbps:6.2f}" if row.busbw_gbps is not None else f"{'n/a':>6}"
    wrong = "N/A" if row.num_wrong is None else str(row.num_wrong)
    return f"{_time(row.time_us)}  {row.algbw_gbps:6.2f}  {busbw}  {wrong:>6}"


def _time(us: float) -> str:
    return f"{us:7.2f}" if us < 10_000 else f"{us:7.1f}" if us < 100_000 else f"{us:7.0f}"


add_arguments, config_from_args, validate, main = options.measurement_command(sweep, render)
