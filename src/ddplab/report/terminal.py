"""Terminal rendering with rich. Renders from records (the report a command writes), never from live
objects, so what the terminal shows is what the report holds."""

from __future__ import annotations

import math
import os
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape as escape_markup
from rich.table import Table

from ..basics import interrupts
from ..errors import ExitCode, printable
from ..basics.sizes import human_bytes

VERDICT_STYLE = {"pass": "bold green", "warn": "bold yellow", "fail": "bold red", "skip": "dim", "info": "bold blue"}


def escape(text: str) -> str:
    """Text from a record, safe to print: no rich markup, and no control character the terminal would act on."""
    return escape_markup(printable(text))


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """The reader of its stream went away (`ddplab run | head -1`): the run goes on without a screen and still
        writes its report, with its own exit code. rich's own handling exits at once (SystemExit(1)): the lab
        then wrote no report, and a job that passed exited 1."""
        self.quiet = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self.file.fileno())  # Python's own writes and its flush at exit find an open file too
        os.close(devnull)


def make_console(stderr: bool = False) -> Console:
    """The command's console: standard output, or standard error when standard output carries a JSON document."""
    console = _Console(highlight=False, stderr=stderr)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        # Logs and CI: wide enough that tables and the nccl-tests layout do not fold.
        console = _Console(highlight=False, width=160, stderr=stderr)
    return console


def kv_table(title: str, rows: list[tuple[str, object]], markup: bool = False) -> Table:
    """Two columns. Values are escaped unless ``markup``: error texts contain [brackets]."""
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("key", style="bold")
    table.add_column("value", overflow="fold")
    for k, v in rows:
        text = text_of(v)
        table.add_row(escape(str(k)), text if markup else escape(text))
    return table


def text_of(value) -> str:
    """A value as the terminal shows it: a missing or non-finite number reads "n/a", never None, null or nan
    (also inside a drill's or a record's nested numbers)."""
    if value is None:
        return "n/a"
    if isinstance(value, float) and not math.isfinite(value):
        return "n/a" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {text_of(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(text_of(v) for v in value) + "]"
    return str(value)


def verdict_text(verdict) -> str:
    verdict = str(verdict)
    return f"[{VERDICT_STYLE.get(verdict, '')}]{verdict.upper()}[/]"


def rank_table(title: str, ranks: list) -> Table:
    """One row per rank: the sampler's view (RankSample) or the final outcome (RankOutcome)."""
    table = Table(title=title, title_justify="left")
    for col in ("rank", "pid", "device", "device mem", "peak alloc", "RSS", "cpu user s", "cpu sys s"):
        table.add_column(col, justify="right")
    for r in ranks:
        peaks = getattr(r, "peaks", None)
        table.add_row(
            str(r.rank), str(r.pid), str(getattr(r, "device", "")),
            human_bytes(getattr(r, "device_mem_bytes", None) or (peaks.peak_device_mem_bytes if peaks else None)),
            human_bytes(getattr(r, "peak_mem_bytes", None)),
            human_bytes(getattr(r, "rss_bytes", None) or (peaks.peak_rss_bytes if peaks else None)),
            _num(getattr(r, "cpu_user_s", None) if peaks is None else peaks.cpu_user_s),
            _num(getattr(r, "cpu_system_s", None) if peaks is None else peaks.cpu_system_s),
        )
    return table


def failures(session, console) -> None:
    """Each failed rank's own error text, and whom torchrun would blame (a SessionRecord)."""
    for rank in session.ranks:
        if rank.failure:
            f = rank.failure
            exit_code = "exit code unknown" if f.exitcode is None else f"exit {f.exitcode}"
            console.print(f"[red]rank {rank.rank} failed[/] ({exit_code}, {f.signal or 'no signal'}): "
                          f"{escape(f.message.strip()[-600:])}")
    if session.launcher_error:
        console.print(f"[red]launcher error:[/] {escape(session.launcher_error)}")
    if session.hang:
        console.print(f"[red]hang[/] (no progress for {session.hang.no_progress_s} s): {escape(session.hang.reason)}")
    if session.culprit:
        console.print(f"[red]culprit[/] ({session.culprit.kind}): {escape(session.culprit.in_words())}: "
                      f"{escape(session.culprit.reason)}")
    if session.machines_lost:
        lost = session.machines_lost
        console.print("[red]machine lost:[/] " + escape("; ".join(f"{m} (ranks {r})" for m, r in lost.machines.items())
                                                        + f": {lost.reason}"))
    if session.torchrun_root_cause_rank is not None:
        console.print(f"torchrun would name rank {session.torchrun_root_cause_rank} as root cause (first to fail)")


def stage_line(verdict, name: str, summary: str, duration_s: float | None) -> str:
    """One stage of `ddplab run` as it ends: its verdict, name, summary and time."""
    took = f" ({duration_s:.1f} s)" if duration_s is not None else ""
    return f"{verdict_text(verdict)} {escape(name)}: {escape(summary)}{took}"


def check_table(title: str, rows: list) -> Table:
    """The verdict table: one row per records.Check."""
    table = Table(title=title, title_justify="left")
    for col in ("stage", "check", "verdict", "value", "threshold"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(escape(r.stage), escape(r.check), verdict_text(r.verdict), escape(r.value), escape(r.threshold))
    return table


def added_cost_table(rows: list) -> Table:
    """What the framework adds per call: one row per records.library_engine.AddedCost."""
    table = Table(title="What torch adds per call (torch engine - library engine, back to back)", title_justify="left")
    for col in ("collective", "size (B)", "place", "timing", "torch (us)", "library (us)", "added (us)", "share"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(escape(r.op), str(r.size_bytes), "in" if r.in_place else "out", escape(r.timing),
                      f"{r.torch_us:.2f}", f"{r.library_us:.2f}", f"{r.added_us:+.2f}", f"{100 * r.share:.0f} %")
    return table


def _num(v) -> str:
    return "n/a" if v is None or not math.isfinite(v) else f"{v:.2f}"


def announce(console, placement, run) -> None:
    """One line on where the ranks go and which backend, with the reason; then the warnings."""
    devices = sorted(set(placement.device_indices))
    where = ("one per device" if not placement.shared_device else "all on device 0" if devices == [0]
             else f"{len(placement.device_indices) // len(devices)} per device on devices {devices}")
    cap = ""
    if placement.memory_fraction is not None:
        cap = f", allocator cap {placement.memory_fraction:.3f} per rank"
        if not placement.memory_fraction_enforced:
            cap += " (not enforced on the host)"
    console.print(f"{placement.nproc} ranks {where}{cap}; backend [bold]{placement.backend}[/]: "
                  f"{escape(placement.backend_reason)}")
    for w in placement.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}")
    console.print(f"run {run.run_id} -> {run.path}")


@contextmanager
def live_ranks(console):
    """Live per-rank table while ranks run (terminal only); yields the sampler's callback or None."""
    if console is None or not console.is_terminal:
        yield None
        return
    from rich.live import Live

    title = "Ranks (live, every 0.5 s)"
    with Live(rank_table(title, []), console=console, refresh_per_second=4, transient=True) as live:
        yield lambda sample: live.update(rank_table(title, sample.ranks))


def footer(console, session, verdict, summary: str) -> None:
    """The warnings a run carried, then its verdict with a one-line summary."""
    for w in (session.warnings if session is not None else ()):
        console.print(f"[yellow]warning:[/] {escape(w)}")
    console.print(f"verdict: {verdict_text(verdict)} - {escape(summary)}")


def stopped_exit_code(code: int) -> int:
    """``code``, or 130 when a stop signal came while the command ran."""
    stop = interrupts.requested()
    return ExitCode.INTERRUPTED if stop is not None and stop != interrupts.DEADLINE else code
