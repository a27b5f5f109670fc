"""One run's directory and the variables that tie its ranks to it: the one place that spells them.

One run = one run directory, and one directory = one run, with one layout for every multi-rank job (a lab
stage, a drill, `ddplab launch`: one supervisor, ddplab/supervision/):
    <run_dir>/
        run-id                       written first, atomically: a directory holding it is in use
        job.json                     what every rank was asked to do (for people to read)
        listen.json                  where the rendezvous store listens (cluster/exposure.py)
        pids/<rank>                  each rank's pid, written by the rank itself (the sampler reads it)
        ranks/<rank>/status.json     heartbeat: phase, progress, main thread location (supervision/beacon.py)
        ranks/<rank>/error.json      the rank's uncaught exception, with its traceback
        ranks/<rank>/stacks.txt      every thread's Python stack, written on request
        ranks/<rank>/fatal.txt       faulthandler: the stack signal (GIL held) and fatal signals
        ranks/<rank>/py-spy.txt      the stacks py-spy read from outside a rank that did not answer a hang's request
        ranks/<rank>/flight.json     the rank's flight record, dumped on request
        ranks/<rank>/answered        the id of the last dump request the rank answered
        ranks/<rank>/arrivals.json   when the rank arrived at its recent collectives (supervision/arrivals.py)
        ranks/sampler-querying-device  the sampler's flag while it queries the device (supervision/timed_windows.py)
        dump-request.json            {"id", "reason", "by"}: every rank dumps when the id changes
        family.json                  every process the job started, as the watcher last saw them (the guardian's)
        daemons.json                 daemons the launcher started for the job, and how to stop them (the guardian's)
        stragglers.json              the straggler watch's findings as they stand (supervision/straggler_watch.py)
        fr/torch_rank_<rank>         torch's own flight-recorder dumps (e.g. on a collective timeout)
        logs/<elastic run id>_*/attempt_0/<local_rank>/{stdout,stderr}.log, error.json
        mps/pipe, mps/log            a private sharing daemon's directories (platform/sharing_daemon.py)
        report.json, report.html     the command's report: report.json always (`ddplab launch` and `run` write the
                                     page too; `ddplab report` draws it from the JSON)

Every rank carries the run's id and directory, and the launcher's identity, in its environment: that is how
`ddplab clean` recognises a rank and tells whether its launcher lives (docs/processes.md).
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import UsageError
from .files import create_exclusive, make_directory

DEFAULT_RUNS_DIR = "ddplab-runs"
RUN_ID_ENV = "DDPLAB_RUN_ID"  # every rank carries it: how `ddplab clean` recognises our ranks
RUN_DIR_ENV = "DDPLAB_RUN_DIR"
LAUNCHER_PID_ENV = "DDPLAB_LAUNCHER_PID"
# The launcher's start time in clock ticks since boot: with its pid, an identity that reads the same from any PID
# namespace (a pid alone does not), so `ddplab clean` can tell whether it lives.
LAUNCHER_START_ENV = "DDPLAB_LAUNCHER_START"
MARKER_ENVS = (RUN_ID_ENV, RUN_DIR_ENV, LAUNCHER_PID_ENV, LAUNCHER_START_ENV)
# A job across machines: HOST:PORT of the job's store, where the ranks publish their status. Unset: files only.
STATUS_STORE_ENV = "DDPLAB_STATUS_STORE"
# The placement a drill's training script (drills/script.py) runs with, as JSON, set by the lab's session.
PLACEMENT_ENV = "DDPLAB_DRILL_PLACEMENT"
RUN_ID_FILE = "run-id"
REPORT_FILE = "report.json"
# What marks a directory as a run's, besides RUN_ID_FILE: runs from before it existed.
EARLIER_RUN_MARKERS = ("job.json", REPORT_FILE, "pids")
SAMPLER_FLAG = "sampler-querying-device"  # no .json suffix: status readers never take it for a rank


def _at(*parts: str) -> property:
    return property(lambda self: self.path.joinpath(*parts))


def _in_rank_dir(name: str) -> Callable[["RunDir", int], Path]:
    return lambda self, rank: self.rank_dir(rank) / name


@dataclass(frozen=True)
class RunDir:
    path: Path
    run_id: str

    @classmethod
    def create(cls, base: str | os.PathLike | None, label: str, option: str = "--run-dir") -> "RunDir":
        """A fresh run directory (``claim_new``), with the directories its ranks write into."""
        path, run_id = claim_new(base, label, option)
        for sub in ("pids", "ranks", "fr"):
            make_directory(path / sub, option)
        return cls(path.resolve(), run_id)

    @classmethod
    def from_environ(cls, environ=None) -> "RunDir":
        """The run a rank belongs to, as its launcher told it."""
        environ = os.environ if environ is None else environ
        return cls(Path(environ[RUN_DIR_ENV]), environ[RUN_ID_ENV])

    @classmethod
    def existing(cls, path: str | os.PathLike) -> "RunDir | None":
        """The run another launcher created at ``path``, by its run-id file; None while no run has claimed it."""
        try:
            run_id = (Path(path) / RUN_ID_FILE).read_text().strip()
        except OSError:
            return None
        return cls(Path(path).resolve(), run_id) if run_id else None

    def marker_env(self, launcher_pid: int, launcher_start_ticks: int | None) -> dict[str, str]:
        """What every rank carries in its environment (so it shows in /proc/<pid>/environ)."""
        return {RUN_ID_ENV: self.run_id, RUN_DIR_ENV: str(self.path), LAUNCHER_PID_ENV: str(launcher_pid),
                LAUNCHER_START_ENV: str(launcher_start_ticks or "")}

    # ---------------------------------------------------------------- paths (the module docstring's layout)
    job_file = _at("job.json")
    listen_file = _at("listen.json")  # written before the ranks start
    logs_dir = _at("logs")
    ranks_dir = _at("ranks")
    sampler_flag = _at("ranks", SAMPLER_FLAG)  # beside the ranks' directories, which the ranks read anyway
    sharing_daemon_dir = _at("mps")
    family_file = _at("family.json")
    daemons_file = _at("daemons.json")
    dump_request_file = _at("dump-request.json")
    report_file = _at(REPORT_FILE)
    page_file = _at("report.html")
    stragglers_file = _at("stragglers.json")

    status_file = _in_rank_dir("status.json")
    error_file = _in_rank_dir("error.json")
    stack_file = _in_rank_dir("stacks.txt")
    fatal_file = _in_rank_dir("fatal.txt")
    py_spy_file = _in_rank_dir("py-spy.txt")
    flight_file = _in_rank_dir("flight.json")
    answered_file = _in_rank_dir("answered")
    arrivals_file = _in_rank_dir("arrivals.json")

    @property
    def torch_dump_prefix(self) -> str:
        """torch's own flight-recorder dumps (it appends the rank)."""
        return str(self.path / "fr" / "torch_rank_")

    def rank_dir(self, rank: int) -> Path:
        return self.ranks_dir / str(rank)

    def pid_file(self, rank: int) -> Path:
        return self.path / "pids" / str(rank)

    def torch_dump_file(self, rank: int) -> Path:
        return Path(f"{self.torch_dump_prefix}{rank}")

    def child(self, name: str) -> Path:
        """A directory inside this run for a launch of its own (a drill's child launcher, a torchrun)."""
        return self.path / name

    def rank_pids(self) -> dict[int, int]:
        out = {}
        for f in (self.path / "pids").glob("[0-9]*"):  # not the atomic writer's hidden temporary files
            try:
                out[int(f.name)] = int(f.read_text().strip())
            except (ValueError, OSError):
                continue
        return out

    def ranks_seen(self) -> list[int]:
        """Ranks that made their directory (every rank does, first thing)."""
        try:
            return sorted(int(p.name) for p in self.ranks_dir.iterdir() if p.name.isdigit())
        except OSError:
            return []

    def status_files(self) -> list[Path]:
        return [self.status_file(r) for r in self.ranks_seen() if self.status_file(r).exists()]

    def log_files(self, local_rank: int) -> list[Path]:
        return sorted(self.path.glob(f"logs/*/attempt_*/{local_rank}/std*.log"))


def claim_new(base: str | os.PathLike | None, label: str, option: str) -> tuple[Path, str]:
    """A directory for a new run and the run's id (label-YYYYmmdd-HHMMSS-xxxxxx: readable, sortable, and unique
    even within one second): ``base`` if given, else ./ddplab-runs/<run id>. It is refused (exit 2; ``option`` names
    it) if it holds a run: two launchers sharing one overwrite each other's files. The claim file is created
    atomically, so of two racing runs exactly one gets it."""
    run_id = f"{label}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    path = Path(base) if base else Path(DEFAULT_RUNS_DIR) / run_id
    make_directory(path, option)
    check_unused(path, option)
    if not create_exclusive(path / RUN_ID_FILE, f"{run_id}\n"):  # another run took it since the check
        raise _in_use(path, option, run_in(path) or "(another run)")
    return path, run_id


def check_unused(path: Path, option: str) -> None:
    """Refuse (exit 2) a directory that already holds a run."""
    holder = run_in(path)
    if holder is not None:
        raise _in_use(path, option, holder)


def _in_use(path: Path, option: str, holder: str) -> UsageError:
    return UsageError("run-dir-in-use", f"{option} {path} already holds run {holder}; every run needs a "
                                        f"directory of its own: give a new one, or leave {option} out")


def run_in(path: Path) -> str | None:
    """The run a directory holds: its run id, a description of an earlier run's files, or None."""
    try:
        claim = (path / RUN_ID_FILE).read_text().strip()
        return claim or "(being created)"
    except FileNotFoundError:
        pass
    except OSError:
        return "(unreadable run-id)"
    for name in EARLIER_RUN_MARKERS:
        if (path / name).exists():
            return f"(an earlier run: {name})"
    return None
