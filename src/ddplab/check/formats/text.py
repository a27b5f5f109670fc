"""The terminal: one row per check with its status, then the node's status line and where the report is."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from ..record import CheckRecord, Status

STYLE = {Status.OK: "bold green", Status.WARNING: "bold yellow", Status.CRITICAL: "bold red", Status.UNKNOWN: "dim"}


def status_text(status: Status) -> str:
    return f"[{STYLE[status]}]{status.label}[/]"


def render(record: CheckRecord, console) -> None:
    table = Table(title="ddplab check", title_justify="left")
    for col in ("stage", "check", "status", "value", "expected"):
        table.add_column(col, overflow="fold")
    for c in record.node_checks:
        table.add_row(escape(c.stage), escape(c.name), status_text(c.status), escape(c.value), escape(c.threshold))
    console.print(table)
    if record.machine is not None:
        console.print(f"machine type: {escape(str(record.machine))}; expectations: "
                      f"{escape('; '.join(record.expectations))}")
    for fault in record.injected:
        console.print(f"[yellow]injected fault:[/] {escape(fault)}")
    where = f"judged from {record.from_report}" if record.from_report else f"report: {record.out}/report.html"
    took = f" in {record.duration_s} s" if record.duration_s is not None and not record.from_report else ""
    # one line, never wrapped at the terminal's width: runners and people grep it ("status: CRITICAL - ...")
    console.print(f"status: {status_text(record.status)} - {escape(record.summary)}{took}; {escape(where)}",
                  soft_wrap=True)
