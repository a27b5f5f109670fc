"""Where a supervised job's files live. The job directory is the job's run directory (rundir.RunDir): claimed
as every run's is, so a directory that holds a run is refused; its run id and path, and the launcher's
identity, reach every rank through the variables rundir.py names (RunDir.marker_env), so `ddplab clean`
tells a job's rank whose launcher is gone as it does any ddplab rank (docs/processes.md); and the ranks'
pid files are where RunDir keeps them, so the launcher's sampler (sampler.py) finds them.

    <job dir>/
        run-id                       the claim (rundir.py)
        report.json, report.html
        ranks/<rank>/status.json     heartbeat: pid, phase, main thread location, FR status
        ranks/<rank>/error.json      the rank's uncaught exception, with its traceback
        ranks/<rank>/stacks.txt      every thread's Python stack, written on request
        ranks/<rank>/fatal.txt       faulthandler: the stack signal (GIL held) and fatal signals
        ranks/<rank>/flight.json     the rank's flight record, dumped on request
        ranks/<rank>/answered        the id of the last dump request the rank answered
        fr/torch_rank_<rank>         torch's own flight-recorder dumps (e.g. on a collective timeout)
        dump-request.json            {"id", "reason", "by"}: every rank dumps when the id changes
        pids/<rank>                  the rank's pid (RunDir.pid_file)
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from ..rundir import RunDir

__all__ = ["JobDir", "write_json_atomically"]

LABEL = "launch"  # run ids read launch-<date>-<time>-<hex>, as the default directory's name does
OUT_OPTION = "--out"


def write_json_atomically(path: Path, value: dict) -> None:
    """Readers never see half a file: write a sibling, then rename over the target."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value, default=str))
    os.replace(tmp, path)


@dataclass(frozen=True)
class JobDir:
    path: Path
    run_id: str

    @classmethod
    def create(cls, out: str | None) -> "JobDir":
        """``out`` claimed for this job (UsageError, exit 2, when it holds a run), or ./ddplab-runs/launch-<id>."""
        run = RunDir.create(out, LABEL, option=OUT_OPTION)
        job = cls(run.path, run.run_id)
        for sub in (job.ranks_dir, job.torch_dump_dir):
            sub.mkdir(exist_ok=True)
        return job

    @classmethod
    def from_environ(cls, environ=None) -> "JobDir":
        """Inside a rank: the job directory the launcher named."""
        run = RunDir.from_environ(environ)
        return cls(run.path, run.run_id)

    @property
    def run_dir(self) -> RunDir:
        """The same directory as a run's: its pid files, markers and claim are spelt there."""
        return RunDir(self.path, self.run_id)

    def rank_environment(self, launcher_pid: int, launcher_start_ticks: int | None) -> dict[str, str]:
        """What every rank inherits from the launcher: the run's markers (rundir.py names them)."""
        return self.run_dir.marker_env(launcher_pid, launcher_start_ticks)

    @property
    def ranks_dir(self) -> Path:
        return self.path / "ranks"

    def rank_dir(self, rank: int) -> Path:
        return self.ranks_dir / str(rank)

    def prepare_rank(self, rank: int) -> None:
        """Inside a rank, first thing: its own directory."""
        self.rank_dir(rank).mkdir(parents=True, exist_ok=True)

    def status_file(self, rank: int) -> Path:
        return self.rank_dir(rank) / "status.json"

    def error_file(self, rank: int) -> Path:
        return self.rank_dir(rank) / "error.json"

    def stacks_file(self, rank: int) -> Path:
        return self.rank_dir(rank) / "stacks.txt"

    def fatal_file(self, rank: int) -> Path:
        return self.rank_dir(rank) / "fatal.txt"

    def flight_file(self, rank: int) -> Path:
        return self.rank_dir(rank) / "flight.json"

    def answered_file(self, rank: int) -> Path:
        return self.rank_dir(rank) / "answered"

    def pid_file(self, rank: int) -> Path:
        return self.run_dir.pid_file(rank)

    @property
    def torch_dump_dir(self) -> Path:
        return self.path / "fr"

    @property
    def torch_dump_prefix(self) -> str:
        return str(self.torch_dump_dir / "torch_rank_")

    @property
    def dump_request_file(self) -> Path:
        return self.path / "dump-request.json"

    @property
    def report_file(self) -> Path:
        return self.path / "report.json"

    @property
    def page_file(self) -> Path:
        """The report as a page (html_report.py), beside report.json."""
        return self.path / "report.html"

    def ranks_seen(self) -> list[int]:
        return sorted(int(p.name) for p in self.ranks_dir.iterdir() if p.name.isdigit())

    def read_status(self, rank: int) -> dict | None:
        return _read_json(self.status_file(rank))

    def read_error(self, rank: int) -> dict | None:
        return _read_json(self.error_file(rank))

    def statuses(self) -> dict[int, dict]:
        found = {}
        for rank in self.ranks_seen():
            status = self.read_status(rank)
            if status is not None:
                found[rank] = status
        return found

    def request_dumps(self, reason: str, by: str) -> str:
        """Ask every rank of this job for its flight record and stacks; returns the request id."""
        request_id = uuid.uuid4().hex[:8]
        write_json_atomically(self.dump_request_file,
                              {"id": request_id, "reason": reason, "by": by, "at": time.time()})
        return request_id

    def read_request(self) -> dict | None:
        return _read_json(self.dump_request_file)

    def answered(self, rank: int) -> str | None:
        try:
            return self.answered_file(rank).read_text().strip() or None
        except OSError:
            return None


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
