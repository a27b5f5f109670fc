"""Where a job's launcher meets its ranks (and, across machines, the other launchers), each way yielding a
``Meeting``: ``one_machine`` on loopback only; ``across_machines`` through ddplab's own rendezvous (exit 3 when
nothing answers); ``as_asked`` where the user put the rendezvous elsewhere (`ddplab launch`).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Iterator

from ..basics import interrupts
from ..cluster.exposure import Exposure

# A job across machines that failed: how long the other machines may still report their ranks' end through the
# job's store (their ranks fail within moments of a peer's failure).
LAST_WORDS_S = 2.0


class CannotListen(Exception):
    """The loopback socket for a one-machine rendezvous could not be bound (the port asked for is taken)."""


@dataclass(frozen=True)
class Meeting:
    """How elastic's agent meets its ranks: the rendezvous backend to name, what to add to its configuration,
    how the rendezvous names this machine, and where the run listens (with the port the store got)."""

    backend: str
    configs: dict
    exposure: Exposure
    local_addr: str | None = None
    across_machines: bool = False


@dataclass(frozen=True)
class Rendezvous:
    """The lab's own rendezvous options (--nnodes, --rdzv-endpoint, --rdzv-host, --rdzv-id)."""

    nnodes: int = 1
    endpoint: str = "127.0.0.1:0"  # one machine: the loopback store (cluster/rendezvous.py) on a free port
    join_timeout_s: float = 120.0
    host: str = "auto"  # several machines: host the store here? auto (the endpoint is one of our addresses), yes, no
    store_wait_s: float | None = None  # several machines: how long to wait for the store to answer; None: join timeout
    job_id: str | None = None  # several machines: the job's name (--rdzv-id); None: the endpoint's

    @classmethod
    def from_options(cls, opts) -> "Rendezvous":
        """The rendezvous a command's LaunchOptions ask for (--nnodes, --rdzv-endpoint, --rdzv-host, --rdzv-id)."""
        return cls(nnodes=opts.nnodes, endpoint=opts.rdzv_endpoint or cls.endpoint, host=opts.rdzv_host,
                   job_id=opts.rdzv_id)

    @property
    def run_id(self) -> str | None:
        """Every machine of a job must name the same rendezvous; one machine uses its own run id."""
        return f"ddplab-{self.job_id or self.endpoint}" if self.nnodes > 1 else None


@contextlib.contextmanager
def one_machine(exposure: Exposure, otherwise: str) -> Iterator[Meeting]:
    """The one place a launcher on one machine keeps its rendezvous off the network: a socket bound to 127.0.0.1
    for as long as the block runs, where this torch has the parts (``exposure.loopback_store``); otherwise the
    backend ``otherwise``, listening on every interface. ``CannotListen`` before anything starts."""
    if not exposure.loopback_store:
        yield Meeting(otherwise, {}, exposure)
        return
    from ..cluster import rendezvous

    try:
        listener = rendezvous.bind_loopback(exposure.store_port)
    except OSError as exc:
        raise CannotListen(f"cannot listen on {exposure.store}: {exc}") from exc
    with listener:  # the store serves on a duplicate of it; this copy is closed when the block ends
        yield Meeting(rendezvous.register(), {rendezvous.LISTEN_FD_KEY: listener.fileno()},
                      exposure.listening_at(listener.getsockname()[1]))


@contextlib.contextmanager
def across_machines(exposure: Exposure, rdzv: Rendezvous) -> Iterator[Meeting]:
    """Host the store or reach it (exit 3 when nothing answers; StoreWaitStopped on a stop), then meet through it."""
    from ..cluster import rendezvous

    with rendezvous.meet(exposure.across, rdzv.store_wait_s or rdzv.join_timeout_s, session=rdzv.run_id) as met:
        yield Meeting(rendezvous.register_across_machines(), dict(met.rdzv_configs),
                      exposure.meeting_through(met.store), local_addr=met.store.node_address, across_machines=True)


def as_asked(exposure: Exposure, backend: str) -> Iterator[Meeting]:
    """The user's own rendezvous, untouched (`ddplab launch` across machines or on an address of theirs)."""
    return contextlib.nullcontext(Meeting(backend, {}, exposure))


def wait_for_last_words(wait_s: float = LAST_WORDS_S) -> None:
    """A job across machines failed here: give the other machines' ranks a moment to report their end through the
    store, so that a machine that failed is told from one that vanished. A stop request cuts it short."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and not interrupts.requested():
        time.sleep(0.1)
