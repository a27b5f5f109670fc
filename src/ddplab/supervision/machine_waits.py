"""Elastic's waits for the other machines, where a stop signal can reach them.

torch's elastic agent waits for the other machines inside TCPStore calls, in C++, where Python runs no signal
handler: torch's static rendezvous in ``next_rendezvous`` (the store's constructor waits for every node), the c10d
one while its handler is made (connected to a store that accepts but does not answer), and every agent at the end in
its exit barrier (for the machines whose ranks still run). A stop would be seen only when that wait ended: 600 s for
the static rendezvous, 300 s for the exit barrier (torch's defaults); torchrun, whose handler cannot run there
either, waits the same or, before its handler is set, dies of the signal without a word. During a launch, those
three calls run in a helper thread while the launcher waits in Python, where the stop is raised like any other.
The handlers and the agent are torch's own, the handlers with their backend names, from which elastic derives the
ranks' MASTER_ADDR and MASTER_PORT.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable

POLL_S = 0.2  # how often the launcher's thread is back in Python while it waits
_GIVEN_UP: list[dict[str, Any]] = []  # the outcomes of waits a stop gave up: empty while in torch's C++


@contextlib.contextmanager
def waits_in_a_thread():
    """Inside the block, elastic's rendezvous handlers are made, and meet, and its agents' exit barriers wait, in a
    helper thread (module docstring)."""
    from torch.distributed.elastic.agent.server.api import SimpleElasticAgent
    from torch.distributed.elastic.rendezvous import registry

    # launch_agent calls the registry through its module, and the agent's run its own method: both replaced for
    # the launch
    create, exit_barrier = registry.get_rendezvous_handler, SimpleElasticAgent._exit_barrier
    registry.get_rendezvous_handler = lambda params: _MeetsInAThread(in_a_thread(create, params))
    SimpleElasticAgent._exit_barrier = lambda agent: in_a_thread(exit_barrier, agent)
    try:
        yield
    finally:
        registry.get_rendezvous_handler = create
        SimpleElasticAgent._exit_barrier = exit_barrier


def in_a_thread(call: Callable[..., Any], *args) -> Any:
    """``call(*args)`` in a daemon thread while this one waits in Python; its value, or its exception raised here.
    A stop signal's exception leaves the thread behind, still waiting: the launch ends soon after, and the process
    with its sockets (``left_waiting_in_torch``)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call(*args)
        except BaseException as exc:  # handed to the waiting thread, which raises it
            outcome["error"] = exc

    helper = threading.Thread(target=run, name="ddplab-machine-wait", daemon=True)
    helper.start()
    try:
        while helper.is_alive():
            helper.join(POLL_S)
    except BaseException:
        _GIVEN_UP.append(outcome)  # (is_alive can already say no: the exception came inside join)
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def left_waiting_in_torch() -> bool:
    """Whether a wait a stop gave up is still running in torch's C++. Should the other machine arrive while the
    interpreter shuts down, that thread would come back into Python then, be ended inside pybind11's GIL guard and
    abort the process (SIGABRT, "terminate called without an active exception", instead of exit 130): such a process
    leaves without the interpreter's shutdown, once its report is written (cli.main)."""
    return any(not outcome for outcome in _GIVEN_UP)


class _MeetsInAThread:
    """A rendezvous handler whose ``next_rendezvous`` runs in a helper thread; everything else is the handler's."""

    def __init__(self, handler):
        self._handler = handler

    def __getattr__(self, name):
        return getattr(self._handler, name)

    def next_rendezvous(self):
        return in_a_thread(self._handler.next_rendezvous)
