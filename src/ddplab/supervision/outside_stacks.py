"""A rank's stacks read from outside its process, with py-spy, for the ranks that did not answer a hang's dump
request: something holds their GIL (a C call that never releases it), they are stuck in C, stopped, or they exec'd
another program. Nothing is asked of the rank: py-spy reads the interpreter's memory, so a rank whose own threads
cannot run still shows the user's line it is on.

py-spy is optional (``pip install 'ddplab[stacks]'``). Nothing of it runs before a hang is declared; then one
``py-spy dump`` per rank, every rank at once, bounded by ``TIMEOUT_S`` in all. A running rank is read with
``--native`` (py-spy attaches with ptrace for a moment and unwinds the C frames too); where that fails or takes too
long (a platform py-spy cannot unwind on, a loaded machine, a process that is not Python) it is read again
without. A stopped rank (SIGSTOP, a debugger) is read with ``--nonblocking``: without attaching, so it stays
stopped where it stopped (py-spy's default suspend fails on a stopped process, and resuming it would move it on);
no native frames then.
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
# Kept of TIMEOUT_S for reading a rank again without --native: unwinding C frames took 0.2-1.9 s a rank on the
# loaded 2-core machine, Python frames alone 0.01-0.3 s (docs/RESULTS.md, scripts/py_spy_cost.py).
PLAIN_RESERVE_S = 1.0
MISSING = "py-spy not installed: pip install 'ddplab[stacks]' for stacks of ranks that hold the GIL"


@dataclass(frozen=True)
class Target:
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


def take(targets: list[Target], file_of: Callable[[int], Path], timeout_s: float = TIMEOUT_S,
         native: bool = True) -> tuple[dict[int, Dump], str | None]:
    """Every target's stacks, read at once: (rank -> its dump, None), or ({}, MISSING) where py-spy is not
    installed. Each rank's output, or why there is none, is written to ``file_of(rank)``. ``native``: False reads
    Python frames only (scripts/py_spy_cost.py measures both)."""
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


def _dump(py_spy: str, target: Target, path: Path, deadline: float, native_frames: bool) -> Dump:
    if target.stopped:
        return _run(py_spy, target, path, deadline, ["--nonblocking"],
                    " (stopped: read without attaching, no native frames)")
    if not native_frames:
        return _run(py_spy, target, path, deadline, [])
    native = _run(py_spy, target, path, deadline - PLAIN_RESERVE_S, ["--native"])
    if native.taken:
        return native
    return _run(py_spy, target, path, deadline, [], f" (no native frames: with --native, {native.words})")


def _run(py_spy: str, target: Target, path: Path, deadline: float, options: list[str], note: str = "") -> Dump:
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


def _written(target: Target, path: Path, command: list[str], words: str, text: str, taken: bool) -> Dump:
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
