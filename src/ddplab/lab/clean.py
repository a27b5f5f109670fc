"""`ddplab clean` as a library, in the measurement shape (measurements/__init__.py): list orphaned ranks (a
launcher marked them and that launcher is provably gone) and, with ``yes``, end exactly those (SIGTERM, then
SIGKILL) and check the device memory came back; other processes on the device only when named (``pid``).
supervision/procs.py holds the evidence an orphan needs and how a process is ended (docs/processes.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..basics.cli_options import Range, argv_of, check_fields, option, switch
from ..records.clean import CleanRecord

if TYPE_CHECKING:
    from ..basics.observer import Observer

NAME = "clean"
SUMMARY = "list (and with --yes end) orphaned ranks whose launcher is gone; anything else only by --pid"
MAX_GRACE_S = 300.0


@dataclass(frozen=True, kw_only=True)
class CleanConfig:
    """List orphaned ranks, and with ``yes`` end exactly those (or the one process named by ``pid``)."""

    yes: bool = switch("--yes", default=False)
    """End the listed processes (by default they are only listed)."""
    grace_s: float = option("--grace", default=5.0, range=Range(0, MAX_GRACE_S, unit=" seconds"))
    """Seconds between SIGTERM and SIGKILL."""
    pid: int | None = option("--pid", default=None, range=Range(0, 2**31 - 1, reference="refused-pid"))
    """End this one process instead of the orphans (with --yes), e.g. another process on the device. Pid 1,
    ddplab itself and its ancestors are refused, and the process must still have the start time it was listed
    with when the signal is sent; default: the orphans.

    procs.refuse_to_name says which pids are refused, before anything is surveyed."""

    def __post_init__(self):
        check_fields(self)

    to_argv = argv_of  # the command line that gives this config back


Config, Record = CleanConfig, CleanRecord
checks, summary = CleanRecord.checks, CleanRecord.summary  # the kind's hooks (records.core) are the record's own


def run(config: CleanConfig, observer: "Observer | None" = None) -> CleanRecord:
    """What was found, and what ``yes`` ended; refuses (UsageError) a pid that may not be named, first."""
    from ..supervision.procs import clean

    return clean(config.pid, config.yes, config.grace_s)
