"""A rank's stacks read from outside its process with py-spy (optional: ``ddplab[stacks]``), for the ranks that
did not answer a hang's dump request (GIL held, stuck in C, stopped, exec'd): py-spy reads the interpreter's
memory and asks nothing of the rank.

After a hang is declared, one ``py-spy dump`` per rank, all at once, within ``TIMEOUT_S``: ``--native`` first,
then without where that fails or is slow; a stopped rank with ``--nonblocking``, so that it stays where it
stopped (py-spy's suspend fails on it, and resuming it would move it on).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..basics.files import write_text_atomic

TIMEOUT_S = 3.0  # for every rank's dump together: a hang declaration waits at most this long for them
# Kept of TIMEOUT_S for reading a rank again without --native, which reads far faster than unwinding C frames.
PLAIN_RESERVE_S = 1.0
MISSING = "py-spy not installed: pip install 'ddplab[stacks]' for stacks of ranks that hold the GIL"


@dataclass(frozen=True)
class SilentRank:
    rank: int
    pid: int
    stopped: bool  # SIGSTOP or a debugger (state T or t): read without attaching


@dataclass(frozen=True)
class Dump:
    """One rank's py-spy dump: the file it went to, and how it went in words."""

    rank: int
    file: str | None  # None: nothing written (no room for it)
    taken: bool  # py-spy printed the stacks
    words: str  # "py-spy --native, 0.15 s", "py-spy failed: exit 1 (...)", "py-spy did not finish within 3.0 s"


def find() -> str | None:
    """py-spy beside this interpreter (a virtual environment's bin/, not always on PATH), else on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("py-spy")


def take(targets: list[SilentRank], file_of: Callable[[int], Path], timeout_s: float = TIMEOUT_S,
         native: bool = True) -> tuple[dict[int, Dump], str | None]:
    """Every target's stacks, read at once, each written to ``file_of(rank)``: (rank -> its dump, None), or
    ({}, MISSING) without py-spy. ``native``: False reads Python frames only."""
    if not targets:
        return {}, None
    py_spy = find()
    if py_spy is None:
        return {}, MISSING
    from concurrent.futures import ThreadPoolExecutor  # here: every rank imports the watcher's module (boot.py)

    deadline = time.monotonic() + timeout_s
    with ThreadPoolExecutor(max_workers=len(targets), thread_name_prefix="ddplab-py-spy") as pool:
        dumps = list(pool.map(lambda t: _dump(py_spy, t, file_of(t.rank), deadline, native), targets))
    return {d.rank: d for d in dumps}, None


def in_words(dumps: dict[int, Dump]) -> str:
    """rank 1: py-spy --native, 0.15 s; rank 2: py-spy failed: ..."""
    return "; ".join(f"rank {r}: {dumps[r].words}" for r in sorted(dumps))


def _dump(py_spy: str, target: SilentRank, path: Path, deadline: float, native_frames: bool) -> Dump:
    if target.stopped:
        return _run(py_spy, target, path, deadline, ["--nonblocking"],
                    " (stopped: read without attaching, no native frames)")
    if not native_frames:
        return _run(py_spy, target, path, deadline, [])
    native = _run(py_spy, target, path, deadline - PLAIN_RESERVE_S, ["--native"])
    if native.taken:
        return native
    return _run(py_spy, target, path, deadline, [], f" (no native frames: with --native, {native.words})")


def _run(py_spy: str, target: SilentRank, path: Path, deadline: float, options: list[str], note: str = "") -> Dump:
    command = [py_spy, "dump", "--pid", str(target.pid), *options]
    started = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, errors="replace", stdin=subprocess.DEVNULL,
                              timeout=max(0.0, deadline - started))
    except subprocess.TimeoutExpired:  # killed and reaped by subprocess.run
        return _written(target, path, command, f"py-spy did not finish within {deadline - started:.1f} s", "", False)
    except Exception as exc:  # noqa: BLE001 - stacks are evidence: without them the hang is still declared
        return _written(target, path, command, f"py-spy could not run: {exc}", "", False)
    if done.returncode == 0 and done.stdout.strip():
        words = f"{' '.join(['py-spy', *options])}, {time.monotonic() - started:.2f} s{note}"
        return _written(target, path, command, words, done.stdout, True)
    said = (done.stderr.strip() or done.stdout.strip()).splitlines()
    failed = f"py-spy failed: exit {done.returncode}" + (f" ({_first_error(said)})" if said else "")
    return _written(target, path, command, failed, done.stderr + done.stdout, False)


def _written(target: SilentRank, path: Path, command: list[str], words: str, text: str, taken: bool) -> Dump:
    header = f"# rank {target.rank}, pid {target.pid}, at {time.time():.3f}: {' '.join(['py-spy', *command[1:]])}\n"
    try:
        write_text_atomic(path, f"{header}# {words}\n{text}", durable=False, make_parents=True)
    except Exception:  # noqa: BLE001 - no room for the file: the hang is declared without it
        return Dump(target.rank, None, taken, words)
    return Dump(target.rank, str(path), taken, words)


def _first_error(lines: list[str]) -> str:
    """py-spy's reason: its "Error: ..." line where it printed one, else its first line."""
    error = next((line for line in lines if line.startswith("Error:")), lines[0])
    return error.removeprefix("Error:").strip()[:200]
