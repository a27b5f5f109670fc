"""Terminal rendering with rich. Renders from the JSON documents, never from live objects,
so what the terminal shows is what the report holds."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from .report import human_bytes

VERDICT_STYLE = {"pass": "bold green", "warn": "bold yellow", "fail": "bold red", "skip": "dim"}


def make_console() -> Console:
    return Console(highlight=False, soft_wrap=False, width=None)


def kv_table(title: str, rows: list[tuple[str, object]]) -> Table:
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("key", style="bold")
    table.add_column("value", overflow="fold")
    for k, v in rows:
        table.add_row(k, "n/a" if v is None else str(v))
    return table


def verdict_text(verdict: str) -> str:
    return f"[{VERDICT_STYLE.get(verdict, '')}]{verdict.upper()}[/]"


def rank_table(title: str, ranks: list[dict]) -> Table:
    """One row per rank: the sampler's view or the final per-rank results."""
    table = Table(title=title, title_justify="left")
    for col in ("rank", "pid", "device", "device mem", "peak alloc", "RSS", "cpu user s", "cpu sys s"):
        table.add_column(col, justify="right")
    for r in ranks:
        table.add_row(
            str(r.get("rank")), str(r.get("pid")), str(r.get("device", "")),
            human_bytes(r.get("device_mem_bytes", r.get("peak_device_mem_bytes"))),
            human_bytes(r.get("peak_mem_bytes")),
            human_bytes(r.get("rss_bytes", r.get("peak_rss_bytes"))),
            _num(r.get("cpu_user_s")), _num(r.get("cpu_system_s")),
        )
    return table


def stage_table(title: str, stages: list[dict]) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("stage")
    table.add_column("verdict")
    table.add_column("what it showed", overflow="fold")
    for s in stages:
        table.add_row(s["name"], verdict_text(s["verdict"]), s.get("summary", ""))
    return table


def _num(v) -> str:
    return "n/a" if v is None else f"{v:.2f}"
