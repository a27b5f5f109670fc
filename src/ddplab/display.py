"""Terminal rendering with rich. Renders from the JSON documents, never from live objects,
so what the terminal shows is what the report holds."""

from __future__ import annotations

import os

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .report import human_bytes

VERDICT_STYLE = {"pass": "bold green", "warn": "bold yellow", "fail": "bold red", "skip": "dim"}


def make_console() -> Console:
    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        # Logs and CI: wide enough that tables and the nccl-tests layout do not fold.
        console = Console(highlight=False, width=160)
    return console


def kv_table(title: str, rows: list[tuple[str, object]], markup: bool = False) -> Table:
    """Two columns. Values are escaped unless ``markup``: error texts contain [brackets]."""
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("key", style="bold")
    table.add_column("value", overflow="fold")
    for k, v in rows:
        text = "n/a" if v is None else str(v)
        table.add_row(escape(str(k)), text if markup else escape(text))
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


def failures(results: dict, console) -> None:
    """Each failed rank's own error text, and whom torchrun would blame."""
    for rank in results["ranks"]:
        if rank.get("failure"):
            f = rank["failure"]
            console.print(f"[red]rank {rank['rank']} failed[/] (exit {f['exitcode']}, {f['signal'] or 'no signal'}): "
                          f"{escape(f['message'].strip()[-600:])}")
    if results.get("launcher_error"):
        console.print(f"[red]launcher error:[/] {escape(results['launcher_error'])}")
    if results.get("torchrun_root_cause_rank") is not None:
        console.print(f"torchrun would name rank {results['torchrun_root_cause_rank']} as root cause "
                      f"(first to fail)")


def failure_reason(results: dict) -> str:
    """One line on why a run did not complete: the predicted refusal, or the first rank's last words."""
    if results.get("expected_failure_observed"):
        return f"failed as expected: {results['expected_failure']}"
    if results.get("launcher_error"):
        return results["launcher_error"]
    for rank in results["ranks"]:
        text = (rank.get("failure") or {}).get("message", "").strip()
        if text:
            return text.splitlines()[-1]
    return "a rank failed"


def check_table(title: str, rows: list[dict]) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("stage", "check", "verdict", "value", "threshold"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(escape(r["stage"]), escape(r["check"]), verdict_text(r["verdict"]), escape(r["value"]),
                      escape(r["threshold"]))
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


def announce(console, placement, nproc: int, run) -> None:
    """One line on where the ranks go and which backend, with the reason; then the warnings."""
    devices = sorted(set(placement.device_indices))
    where = ("one per device" if not placement.shared_device else "all on device 0" if devices == [0]
             else f"{len(placement.device_indices) // len(devices)} per device on devices {devices}")
    cap = ""
    if placement.memory_fraction is not None:
        cap = f", allocator cap {placement.memory_fraction:.3f} per rank"
        if not placement.memory_fraction_enforced:
            cap += " (not enforced on the host)"
    console.print(f"{nproc} ranks {where}{cap}; backend [bold]{placement.backend}[/]: {placement.backend_reason}")
    for w in placement.warnings:
        console.print(f"[yellow]warning:[/] {w}")
    console.print(f"run {run.run_id} -> {run.path}")


class live_ranks:
    """Live per-rank table while ranks run (terminal only); yields the sampler's callback or None."""

    title = "Ranks (live, every 0.5 s)"

    def __init__(self, console):
        self.console = console if console is not None and console.is_terminal else None
        self.live = None

    def __enter__(self):
        if self.console is None:
            return None
        from rich.live import Live

        self.live = Live(rank_table(self.title, []), console=self.console, refresh_per_second=4, transient=True)
        self.live.__enter__()
        return lambda sample: self.live.update(rank_table(self.title, sample["ranks"]))

    def __exit__(self, *exc):
        if self.live is not None:
            self.live.__exit__(*exc)


def footer(console, results: dict, verdict: str, summary: str) -> None:
    """The warnings a run carried, then its verdict with a one-line summary."""
    for w in results.get("warnings", []):
        console.print(f"[yellow]warning:[/] {escape(w)}")
    console.print(f"verdict: {verdict_text(verdict)} - {escape(summary)}")


def finish(doc: dict, render, json_path: str | None, console) -> int:
    """What every command ends with: write the document if asked, show it, map its verdict to an exit code.

    Written first: a verdict is printed only once its report is safely stored, never a PASS
    followed by a write error.
    """
    from .report import exit_code, write_json

    if json_path:
        write_json(doc, json_path)
    render(doc, console)
    return int(exit_code(doc["verdict"]))
