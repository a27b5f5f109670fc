"""Errors that reach the user, and the exit codes they map to.

Only ``cli.py`` turns exceptions into exit codes. Everything else raises a
``DdplabError`` subclass whose ``reference`` is a stable kebab-case name (as pip's
diagnostic errors do), so users and tests can match on it.
"""

from __future__ import annotations

import difflib
import enum
from typing import Iterable


class ExitCode(enum.IntEnum):
    PASS = 0  # every check passed (verdict pass or warn)
    CHECK_FAILED = 1  # the run completed but a check failed (verdict fail)
    USAGE = 2  # bad input, refused before any process started
    ENVIRONMENT = 3  # this machine cannot run it (backend or device missing)
    INTERNAL = 70  # a bug in ddplab: the traceback went to a file (sysexits.h EX_SOFTWARE)
    INTERRUPTED = 130  # Ctrl+C


class DdplabError(Exception):
    """An error with a stable reference, a one-line message and an optional hint."""

    exit_code: ExitCode = ExitCode.CHECK_FAILED

    def __init__(self, reference: str, message: str, hint: str | None = None):
        super().__init__(message)
        self.reference = reference
        self.message = message
        self.hint = hint

    def render(self) -> str:
        text = f"error: {self.reference}\n  {self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class UsageError(DdplabError):
    """The user asked for something invalid; nothing was started."""

    exit_code = ExitCode.USAGE


class EnvironmentUnsupported(DdplabError):
    """The request is valid but this machine cannot run it."""

    exit_code = ExitCode.ENVIRONMENT


def invalid_choice(what: str, value: object, choices: Iterable[str]) -> UsageError:
    """A UsageError naming the bad value, the valid choices and a close match if any."""
    choices = list(choices)
    close = difflib.get_close_matches(str(value), choices, n=1)
    maybe = f' - maybe you meant "{close[0]}"' if close else ""
    return UsageError(
        f"invalid-{what.replace('_', '-')}",
        f'unknown {what} "{value}"{maybe}; valid choices: {", ".join(choices)}',
    )
