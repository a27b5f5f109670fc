"""Ctrl+C, SIGTERM and SIGHUP (the terminal closed) belong to the launcher, from the first line of `ddplab` to its
exit.

A stop signal must neither kill ddplab half-way (no report, ranks left behind) nor be swallowed. It becomes a
*stop request*, acted on at the next safe point: while ranks run (inside ``raising``) it is raised at once, so
elastic tears the ranks down and the launch returns "interrupted"; before a launch nothing starts; between stages
or drills they stop and write a partial report. A second signal outside a launch raises KeyboardInterrupt (the
way out of a slow step), unless it came within REPEAT_S of the first: that is the same stop sent twice (a double
Ctrl+C, `kill -TERM` then `kill -INT`), and cutting it short would lose the report it is writing. Inside a launch
it is absorbed, elastic's teardown being bounded already. A command's own ``deadline`` is the same stop request,
raised by a timer, so it ends ranks and stages exactly as Ctrl+C does.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import threading
import time
from typing import Callable

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
DEADLINE = "deadline"  # what ``requested`` says when a command's deadline, not a signal, asked for the stop
REPEAT_S = 1.0  # a second stop signal this soon after the first is the same stop (module docstring)


class _StopState:
    def __init__(self):
        self.requested: str | None = None  # name of the first stop signal received
        self.requested_at: float | None = None  # when it came (time.time())
        self.raise_in_launch: Callable[[str], BaseException] | None = None
        self.raised_in_launch = False


_state = _StopState()


def install() -> None:
    """Own the stop signals in this process (only the main thread can set handlers; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in STOP_SIGNALS:
        signal.signal(sig, _on_stop_signal)


def owned(func):
    """Decorator: ``func`` runs with the stop signals owned; afterwards the previous handlers and a clean state are
    back."""
    @functools.wraps(func)
    def with_stop_signals_owned(*args, **kwargs):
        with handlers_restored(STOP_SIGNALS):
            install()
            try:
                return func(*args, **kwargs)
            finally:
                reset()
    return with_stop_signals_owned


@contextlib.contextmanager
def handlers_restored(signals):
    """On exit, put back the handlers ``signals`` had on entry (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.getsignal(sig) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            if handler is not None:  # None: installed outside Python; leave it
                signal.signal(sig, handler)


def requested() -> str | None:
    """What asked for the stop first: a signal's name (SIGINT, SIGTERM, SIGHUP), DEADLINE, or None."""
    return _state.requested


def requested_at() -> float | None:
    """When the first stop signal came (time.time()), or None: what ended after it, the stop ended."""
    return _state.requested_at


def reset() -> None:
    """Forget a stop request (tests that exercise it in-process)."""
    _state.__init__()


@contextlib.contextmanager
def raising(make_exception: Callable[[str], BaseException]):
    """Inside the block, the first stop signal (or one already pending) raises ``make_exception(signal_name)``;
    later ones are absorbed. Handlers are ours inside the block even if ``install`` was never called."""
    install()
    _state.raise_in_launch, _state.raised_in_launch = make_exception, False
    try:
        if _state.requested:  # arrived before the block: nothing must start
            _state.raised_in_launch = True
            raise make_exception(_state.requested)
        yield
    finally:
        _state.raise_in_launch = None


@contextlib.contextmanager
def deadline(seconds: float | None):
    """Inside the block, ``seconds`` from now the stop is requested as if a stop signal had come (``requested``
    says DEADLINE), carried by SIGALRM to the main thread; None or outside the main thread: no deadline."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: _request_stop(DEADLINE))
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))  # 0 would disarm it: a deadline already past
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _on_stop_signal(signum, frame) -> None:
    _request_stop(signal.Signals(signum).name)


def _request_stop(name: str) -> None:
    first = _state.requested is None
    if first:
        _state.requested, _state.requested_at = name, time.time()
    if _state.raise_in_launch is not None:
        if not _state.raised_in_launch:
            _state.raised_in_launch = True
            raise _state.raise_in_launch(name)
        return
    if not first and time.time() - _state.requested_at >= REPEAT_S:
        raise KeyboardInterrupt(f"{name} again: stopping at once")
