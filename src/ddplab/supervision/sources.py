"""Where a watcher (watcher.py) reads the job's status: this machine's status files on one machine, the job's store
(cluster/status_store.py) across machines, where a hang one machine declared is announced to the others."""

from __future__ import annotations

import contextlib
import json
import threading
import time

from ..records.supervision import RankState
from ..basics.rundir import RunDir
from . import states as rules

# One read of the job's store: a store cut off must not hold the watch up for long. The client's check() does not
# honour it on a frozen connection, so the wait that holds a teardown (wait_acknowledged) reads on its own thread.
STORE_TIMEOUT_S = 3.0
FILES = "this machine's status files"
JOB_STORE = "the job's store"


class Files:
    """This machine's ranks, from their status files."""

    judged_from = FILES

    def __init__(self, run: RunDir, local_count: int):
        self.run, self.local_count = run, local_count

    def read(self) -> dict[int, RankState]:
        return rules.read_states(self.run)

    def expected(self, states: dict[int, RankState]) -> list[int] | None:
        return rules.expected_ranks(states, self.local_count)


class JobStore:
    """Every rank of the job, from its store (cluster/status_store.py), heartbeats on this machine's clock."""

    judged_from = JOB_STORE

    def __init__(self, reader, address: str):
        self.reader = reader
        self.address = address  # the store's machine, as its ranks name it (they run where it listens)
        self.lost = False  # it answered, then stopped answering

    def read(self) -> dict[int, RankState]:
        try:
            states = self.reader.judging_records(self.reader.read())
        except Exception:  # noqa: BLE001 - the store's host ended (job over, machine gone): nothing new to judge
            self.lost = self.lost or self.reader.world_size is not None
            return {}
        self.lost = False
        return states

    def expected(self, states: dict[int, RankState]) -> list[int] | None:
        return list(range(self.reader.world_size)) if self.reader.world_size else None

    def announce(self, machine: str, reason: str) -> None:
        with contextlib.suppress(Exception):  # noqa: BLE001 - a store gone: the other machines judge on their own
            self.reader.announce_hang(machine, reason)

    def acknowledge(self, machine: str) -> None:
        with contextlib.suppress(Exception):  # noqa: BLE001 - a store gone: the declaring machine stops waiting
            self.reader.acknowledge_hang(machine)

    def wait_acknowledged(self, machines: set[str], wait_s: float) -> set[str]:
        """Wait until every one of ``machines`` read the announcement, at most ``wait_s``; those that did. Read on a
        thread of its own (see STORE_TIMEOUT_S): this wait holds the teardown."""
        seen: set[str] = set()
        deadline = time.monotonic() + wait_s

        def poll() -> None:
            nonlocal seen
            while machines - seen and time.monotonic() < deadline:
                try:
                    seen = self.reader.acknowledged_hang(machines)
                except Exception:  # noqa: BLE001 - a store gone: nobody left to wait for
                    return
                time.sleep(0.05)

        reader = threading.Thread(target=poll, name="ddplab-follow-wait", daemon=True)
        reader.start()
        reader.join(wait_s)
        return set(seen)

    def announced(self) -> dict | None:
        try:
            return self.reader.announced_hang()
        except Exception:  # noqa: BLE001 - a store gone: nothing announced that can be read
            return None


def listened(run: RunDir) -> dict | None:
    """listen.json as the launcher wrote it (where the job listens); None before it is written."""
    with contextlib.suppress(OSError, ValueError):
        listen = json.loads(run.listen_file.read_text())
        return listen if isinstance(listen, dict) else {}
    return None


def store_of(listen: dict | None) -> tuple[str, int] | None:
    """(address, port) of the job's store where the job spans machines, else None."""
    if listen and listen.get("across_machines") and listen.get("address") and isinstance(listen.get("port"), int):
        return listen["address"], listen["port"]
    return None


def open_reader(address: str, port: int, job: str):
    """A reader of the job's store on its own connection, or None: the watcher then judges this machine's files."""
    from ..cluster.status_store import JobStoreReader, open_store

    try:
        return JobStoreReader(open_store(address, port, timeout_s=STORE_TIMEOUT_S), job=job)
    except Exception:  # noqa: BLE001 - any connection failure: the files still say something
        return None

