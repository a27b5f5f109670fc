"""elastic.run's stop path in this process, torch's launcher replaced by a stand-in that plays the signals: what
elastic.run returns, and what it lets out, are ddplab's own."""

import os
import signal
import threading
import time
import uuid
from multiprocessing import resource_tracker

import pytest

from ddplab.basics import interrupts
from ddplab.basics.rundir import RunDir
from ddplab.supervision import elastic


@pytest.fixture
def owned():
    """The stop signals are ddplab's for the test, as from the first line of `ddplab`; pytest's handlers after."""
    with interrupts.handlers_restored(interrupts.STOP_SIGNALS):
        interrupts.reset()
        interrupts.install()
        yield
        interrupts.reset()


def test_a_second_stop_signal_held_back_while_ranks_start_is_absorbed_by_the_launch(owned, tmp_path, monkeypatch):
    """The launcher's thread blocks SIGINT while ranks start. A SIGINT still held back there when the launch's stop is
    raised (torch's static rendezvous gives up its wait in milliseconds) was once let in only after the launch had
    ended: a second signal outside a launch, KeyboardInterrupt, and `ddplab launch` wrote no report."""
    def launch(*args):
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # blocked in this thread: held back
        signal.raise_signal(signal.SIGTERM)  # the stop, raised here as elastic's SignalException

    monkeypatch.setattr("torch.distributed.launcher.api.elastic_launch", lambda config, entrypoint: launch)
    monkeypatch.setattr(resource_tracker, "ensure_running", lambda: None)  # no tracker process for this test
    config = elastic.launch_config(min_nodes=1, max_nodes=1, nproc_per_node=1, run_id="unit",
                                   rdzv_backend="c10d", rdzv_endpoint="127.0.0.1:0")
    try:
        outcome = elastic.run(config, "true", (), RunDir(tmp_path, f"unit-{uuid.uuid4().hex}"), {})
    except KeyboardInterrupt:
        pytest.fail("the held-back SIGINT came out of the launch as KeyboardInterrupt")
    assert outcome.interrupted and outcome.launcher_error == "interrupted: SIGTERM to the launcher"
    assert interrupts.requested() == "SIGTERM"
    assert signal.SIGINT not in signal.sigpending()


def test_a_stop_signal_stays_ddplabs_where_elastic_takes_every_stop_signal(owned, tmp_path, monkeypatch):
    """torch before 2.10 has no LaunchConfig.signals_to_handle: starting the ranks, elastic puts its own handler on
    SIGINT, SIGTERM, SIGHUP and SIGQUIT, and stops the ranks with the signal it got. For a Ctrl+C that was SIGINT,
    which the ranks ignore: 30 s of elastic's grace, then SIGKILL. The stand-in starts as torch 2.4 to 2.9 do."""
    from torch.distributed.elastic.multiprocessing import SignalException, api

    sent_to_ranks = []

    def launch(*args):
        for stop in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):  # PContext.start
            signal.signal(stop, api._terminate_process_handler)
        try:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl+C: to the process, so to a thread not blocking it
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # its handler runs in this thread, between two bytecodes
                time.sleep(0.01)
        except SignalException as exc:  # what the agent stops the ranks with
            sent_to_ranks.append(exc.sigval)
            raise

    monkeypatch.setattr("torch.distributed.launcher.api.elastic_launch", lambda config, entrypoint: launch)
    monkeypatch.setattr(resource_tracker, "ensure_running", lambda: None)
    config = elastic.launch_config(min_nodes=1, max_nodes=1, nproc_per_node=1, run_id="unit",
                                   rdzv_backend="c10d", rdzv_endpoint="127.0.0.1:0")
    outcome = elastic.run(config, "true", (), RunDir(tmp_path, f"unit-{uuid.uuid4().hex}"), {})
    assert outcome.interrupted and outcome.launcher_error == "interrupted: SIGINT to the launcher"
    assert sent_to_ranks == [signal.SIGTERM] and interrupts.requested() == "SIGINT"
