"""The guardian: a small process that ends what a job started if its launcher dies without doing it (SIGKILL).

    python -m ddplab.supervision.guardian RUN_DIR RUN_ID

It blocks reading a pipe on its stdin whose write end only the launcher holds: "done" means the launcher cleaned
up itself; end of file without it means the launcher died (evidence that holds from any PID namespace). Then it
ends the rest of the job: the processes in family.json (by pid AND start time), every process carrying the run
id, and the daemons in daemons.json (their stop command first); what it did goes to guardian.json.

It ignores SIGINT, SIGTERM and SIGHUP (the launcher decides), and imports only the standard library (and
basics/proc_stat.py), to start in tens of milliseconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..basics.proc_stat import start_ticks, still

RUN_ID_ENV = "DDPLAB_RUN_ID"  # rundir.RUN_ID_ENV (not imported: this process starts with the stdlib only)
DONE = b"done"
MODULE = "ddplab.supervision.guardian"  # as job.Guardian starts it: python -m MODULE RUN_DIR RUN_ID
SETTLE_S = 0.3  # the ranks' parent-death guard fires at once; give it a moment before looking
GRACE_S = 2.0
DAEMON_STOP_S = 10.0


def _processes_reading(name: str):
    """(pid, the NUL-separated fields of /proc/PID/NAME) of every process whose file can be read, not this one."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/{name}", "rb") as f:
                yield int(entry), f.read().split(b"\0")
        except OSError:
            continue


def marked(run_id: str) -> dict[int, int | None]:
    """Every process carrying the run id (pid -> start ticks), not this one."""
    needle = f"{RUN_ID_ENV}={run_id}".encode()
    return {pid: start_ticks(pid) for pid, env in _processes_reading("environ") if needle in env}


def still_running(run_dir: Path, run_id: str) -> list[int]:
    """The guardians of this run still at work: their command line names the run's directory and id."""
    wanted = (MODULE.encode(), str(run_dir).encode(), run_id.encode())
    return [pid for pid, args in _processes_reading("cmdline") if all(w in args for w in wanted)]


def wait_finished(run_dir: Path, run_id: str, wait_s: float) -> bool:
    """Wait, at most ``wait_s``, until no guardian of this run is at work (one whose launcher died sweeps for
    SETTLE_S and up to two grace periods more); whether none is."""
    deadline = time.monotonic() + wait_s
    while still_running(run_dir, run_id):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def stop_daemons(run_dir: Path) -> list[dict]:
    """Each daemon in daemons.json: its stop command (with its environment), then its processes."""
    done = []
    for daemon in _read_json(run_dir / "daemons.json") or []:
        entry = {"name": daemon.get("name"), "stop": daemon.get("stop")}
        if daemon.get("stop"):
            try:
                subprocess.run(daemon["stop"], input=daemon.get("stdin", ""), text=True, capture_output=True,
                               env={**os.environ, **(daemon.get("env") or {})}, timeout=DAEMON_STOP_S)
                entry["stopped"] = True
            except (OSError, subprocess.SubprocessError) as exc:
                entry["stopped"] = f"{type(exc).__name__}: {exc}"
        entry["ended"] = _ended({int(p): t for p, t in daemon.get("pids") or []})
        done.append(entry)
    return done


def end(processes: dict[int, int | None], grace_s: float = GRACE_S,
        tick=lambda: None) -> tuple[list[int], list[int], list[int]]:
    """SIGCONT + SIGTERM (a stopped process cannot act on SIGTERM), then SIGKILL after ``grace_s``, each only while
    it is the same process; ``tick`` runs while it waits. (terminated, killed, survived): a survivor is, e.g., in
    uninterruptible sleep, wedged on a device."""
    live = {p: t for p, t in processes.items() if still(p, t)}
    for pid in live:
        for sig in (signal.SIGCONT, signal.SIGTERM):
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
    _wait_gone(live, grace_s, tick)
    killed = {p: t for p, t in live.items() if still(p, t)}
    for pid in killed:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    _wait_gone(killed, grace_s, tick)
    survived = [p for p, t in killed.items() if still(p, t)]
    return sorted(set(live) - set(killed)), sorted(set(killed) - set(survived)), sorted(survived)


def _ended(processes: dict[int, int | None]) -> dict[str, list[int]]:
    terminated, killed, survived = end(processes)
    return {"terminated": terminated, "killed": sorted(killed + survived)}


def _wait_gone(processes: dict[int, int | None], wait_s: float, tick) -> None:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and any(still(p, t) for p, t in processes.items()):
        tick()
        time.sleep(0.05)


def sweep(run_dir: Path, run_id: str) -> dict:
    time.sleep(SETTLE_S)
    daemons = stop_daemons(run_dir)
    family = {int(m["pid"]): m.get("ticks") for m in _read_json(run_dir / "family.json") or []}
    return {"at": time.time(), "daemons": daemons, **_ended({**family, **marked(run_id)})}


def main(argv: list[str]) -> int:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    run_dir, run_id = Path(argv[0]), argv[1]
    said = b""
    with contextlib.suppress(OSError):  # a read that fails: the launcher is gone, as at end of file
        while chunk := os.read(0, 64):
            said += chunk
    if said.strip() == DONE:
        return 0
    report = sweep(run_dir, run_id)
    with contextlib.suppress(OSError):
        tmp = run_dir / f".guardian.json.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(report))
        os.replace(tmp, run_dir / "guardian.json")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
