"""Where a supervised job's files live. The job directory is the job's run directory: its run id and path,
and the launcher's identity, reach every rank through the variables rundir.py names (RunDir.marker_env), so
`ddplab clean` tells a job's rank whose launcher is gone as it does any ddplab rank (docs/processes.md).

    <job dir>/
        report.json
        ranks/<rank>/status.json     heartbeat: pid, phase, main thread location, FR status
        ranks/<rank>/error.json      the rank's uncaught exception, with its traceback
        ranks/<rank>/stacks.txt      every thread's Python stack, written on request
        ranks/<rank>/fatal.txt       faulthandler: the stack signal (GIL held) and fatal signals
        ranks/<rank>/flight.json     the rank's flight record, dumped on request
        ranks/<rank>/answered        the id of the last dump request the rank answered
        fr/torch_rank_<rank>         torch's own flight-recorder dumps (e.g. on a collective timeout)
        dump-request.json            {"id", "reason", "by"}: every rank dumps when the id changes
        pids/<rank>                  the rank's pid (as ddplab's RunDir lays it out)
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from ..rundir import DEFAULT_RUNS_DIR, RunDir, new_run_id

__all__ = ["JobDir", "write_json_atomically"]


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
        run_id = new_run_id("launch")
        path = Path(out) if out else Path(DEFAULT_RUNS_DIR) / run_id
        path.mkdir(parents=True, exist_ok=True)
        for sub in ("ranks", "fr", "pids"):
            (path / sub).mkdir(exist_ok=True)
        return cls(path.resolve(), run_id)

    @classmethod
    def from_environ(cls, environ=None) -> "JobDir":
        """Inside a rank: the job directory the launcher named."""
        run = RunDir.from_environ(environ)
        return cls(run.path, run.run_id)

    def rank_environment(self, launcher_pid: int, launcher_start_ticks: int | None) -> dict[str, str]:
        """What every rank inherits from the launcher: the run's markers (rundir.py names them)."""
        return RunDir(self.path, self.run_id).marker_env(launcher_pid, launcher_start_ticks)

    def rank_dir(self, rank: int) -> Path:
        return self.path / "ranks" / str(rank)

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
        return self.path / "pids" / str(rank)

    @property
    def torch_dump_prefix(self) -> str:
        return str(self.path / "fr" / "torch_rank_")

    @property
    def dump_request_file(self) -> Path:
        return self.path / "dump-request.json"

    @property
    def report_file(self) -> Path:
        return self.path / "report.json"

    def ranks_seen(self) -> list[int]:
        return sorted(int(p.name) for p in (self.path / "ranks").iterdir() if p.name.isdigit())

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
