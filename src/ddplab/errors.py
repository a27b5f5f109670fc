"""Errors that reach the user, and the exit codes they map to. Only ``cli.py`` turns exceptions into exit codes;
everything else raises a ``DdplabError`` whose ``reference`` is a stable kebab-case name (as pip's diagnostic errors
do), so users and tests can match on it.
"""

from __future__ import annotations

import difflib
import enum
import re
from typing import Iterable

# What a terminal acts on instead of showing: C0 controls but the tab, DEL, C1 controls, and the bidirectional
# marks that reorder the text around them. A report's field names and values reach messages, and a crafted
# file must not recolour, retitle or rewrite the user's terminal.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` safe to print: every control character spelt as its escape (ESC as \\x1b, a newline as \\n)."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


class ExitCode(enum.IntEnum):
    PASS = 0  # every check passed (verdict pass or warn)
    CHECK_FAILED = 1  # the run completed but a check failed (verdict fail)
    USAGE = 2  # bad input, refused before any process started
    ENVIRONMENT = 3  # this machine cannot run it (backend or device missing)
    INTERNAL = 70  # a bug in ddplab: the traceback went to a file (sysexits.h EX_SOFTWARE)
    INTERRUPTED = 130  # Ctrl+C


# What each exit code means, as every --help says it and the README lists them (a test holds the two together).
EXIT_CODE_MEANINGS = {
    ExitCode.PASS: "passed, or passed with warnings",
    ExitCode.CHECK_FAILED: "a check failed, or your job failed or hung",
    ExitCode.USAGE: "bad input, refused before anything started (the message names the value and what is valid)",
    ExitCode.ENVIRONMENT: "this machine cannot run it (a backend, a device or disk space is missing)",
    ExitCode.INTERNAL: "a bug in ddplab: one line says what broke and where the full traceback was written",
    ExitCode.INTERRUPTED: "stopped by Ctrl+C, SIGTERM or SIGHUP; the report is written and says so",
}


class DdplabError(Exception):
    """An error with a stable reference, a one-line message and an optional hint."""

    exit_code: ExitCode = ExitCode.CHECK_FAILED

    def __init__(self, reference: str, message: str, hint: str | None = None):
        super().__init__(message)
        self.reference = reference
        self.message = message
        self.hint = hint

    def render(self) -> str:
        """The error as printed: its parts on their own lines, control characters escaped."""
        text = f"error: {printable(self.reference)}\n  {printable(self.message)}"
        if self.hint:
            text += f"\n  hint: {printable(self.hint)}"
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
        f"invalid-{what.replace('_', '-').replace(' ', '-')}",
        f'unknown {what} "{value}"{maybe}; valid choices: {", ".join(choices)}',
    )
