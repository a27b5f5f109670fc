"""Which mechanism raised an error, from the first words of a rank's error text, and the lines of
that text worth showing. Pure: the drills' runner and the oom drill ask; nothing here runs anything.
"""

from __future__ import annotations

import re

OUT_OF_MEMORY = "out-of-memory error"

# The first words of a rank's error, mapped to the mechanism that raised it (first match wins).
MECHANISMS = (
    (re.compile(r"Watchdog caught collective operation timeout|SIGABRT", re.I), "watchdog abort"),
    (re.compile(r"DistStoreError|wait timeout after|waiting for clients|client socket has timed out", re.I),
     "store timeout"),
    (re.compile(r"Timed out waiting .* for (recv|send)|operation to complete", re.I), "collective timeout (gloo)"),
    (re.compile(r"DistBackendError|ncclSystemError|ncclRemoteError|Blocking wait", re.I), "blocking-wait exception"),
    (re.compile(r"out of memory|OutOfMemoryError|can't allocate memory|MemoryError", re.I), OUT_OF_MEMORY),
    (re.compile(r"Connection closed by peer|Connection reset|Broken pipe", re.I), "peer connection lost"),
)


def classify(text: str | None) -> str | None:
    """The mechanism an error text comes from; None when no known one matches."""
    for pattern, name in MECHANISMS:
        if pattern.search(text or ""):
            return name
    return None


def excerpt(text: str | None) -> str:
    """The lines of an error that say what happened, not the traceback frames (their last 600 characters)."""
    lines = [ln for ln in (text or "").splitlines() if ln.strip() and not ln.startswith("  File ")
             and not ln.strip().startswith("^")]
    return "\n".join(lines[-8:])[-600:]
