"""The line at the foot of the terminal while `ddplab run` or `ddplab check` goes through its stages: which stage of
how many is running, and since when.

Drawn by the launcher only when a stage starts and ends (rich's Progress with its refresh thread off, so nothing of
it runs while ranks time their windows), and only on a terminal that is standard output; transient.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn

from .terminal import escape


def shown(console: Console | None) -> bool:
    """Whether ``console`` is a person's terminal on standard output."""
    return console is not None and not console.quiet and console.is_terminal and console.file is sys.stdout


class StageProgress:
    """``with StageProgress(console, total, done) as progress: with progress.stage(name): ...``; draws nothing where
    ``shown(console)`` is false."""

    def __init__(self, console: Console | None, total: int, done: int = 0):
        self.total, self.done = total, done
        # stdout only: what is printed through the console goes above the line; standard error stays its own
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), console=console, auto_refresh=False,
                                  transient=True, redirect_stderr=False, disable=not shown(console))
        self._task = self._progress.add_task("", total=total, completed=done)

    def __enter__(self) -> "StageProgress":
        self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.stop()

    @contextmanager
    def stage(self, name: str):
        """One stage: the line names it while it runs, and counts it once it has ended (however it ended)."""
        self._draw(f"stage {self.done + 1} of {self.total}: {escape(name)}, started {time.strftime('%H:%M:%S')}")
        try:
            yield
        finally:
            self.done += 1
            self._draw(f"{self.done} of {self.total} stages done", advance=1)

    def _draw(self, description: str, advance: int = 0) -> None:
        self._progress.update(self._task, description=description, advance=advance, refresh=True)
