"""Ctrl+C and SIGTERM become a stop request: never fatal, never lost, acted on at safe points."""

import os
import signal
import time

import pytest

from ddplab.basics import interrupts


class Stop(Exception):
    pass


@pytest.fixture
def owned():
    """The stop signals owned by ddplab for the test, the process's own handlers back afterwards."""
    with interrupts.handlers_restored(interrupts.STOP_SIGNALS):
        interrupts.reset()
        interrupts.install()
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL  # or SIGTERM would end pytest
        yield
        interrupts.reset()


def test_a_stop_signal_outside_a_launch_is_recorded_not_fatal(owned):
    os.kill(os.getpid(), signal.SIGTERM)
    assert interrupts.requested() == "SIGTERM"


def test_a_second_signal_outside_a_launch_stops_at_once(owned, monkeypatch):
    monkeypatch.setattr(interrupts, "REPEAT_S", 0.05)
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.1)
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)


def test_a_second_signal_right_after_the_first_is_the_same_stop(owned):
    """`kill -TERM; kill -INT`, or a double Ctrl+C: a launch stopped in milliseconds (one still meeting other
    machines) once took the second for the way out of a slow step, and its report was never written."""
    os.kill(os.getpid(), signal.SIGTERM)
    os.kill(os.getpid(), signal.SIGINT)  # absorbed
    assert interrupts.requested() == "SIGTERM"


def test_inside_a_launch_the_first_signal_raises_and_later_ones_are_absorbed(owned):
    with pytest.raises(Stop, match="SIGINT"):
        with interrupts.raising(lambda name: Stop(name)):
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGTERM)  # absorbed: the teardown is already under way
    assert interrupts.requested() == "SIGINT"


def test_a_stop_that_came_before_the_launch_raises_on_entry(owned):
    os.kill(os.getpid(), signal.SIGTERM)
    with pytest.raises(Stop, match="SIGTERM"):
        with interrupts.raising(lambda name: Stop(name)):
            pytest.fail("the launch must not start")


def test_owned_puts_the_process_handlers_back():
    before = signal.getsignal(signal.SIGTERM)

    @interrupts.owned
    def command():
        os.kill(os.getpid(), signal.SIGTERM)
        return interrupts.requested()

    assert command() == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is before and interrupts.requested() is None


def test_sighup_is_a_stop_signal_too(owned):
    os.kill(os.getpid(), signal.SIGHUP)
    assert interrupts.requested() == "SIGHUP"


def test_a_deadline_is_the_same_stop_request_raised_in_a_launch(owned):
    with pytest.raises(Stop, match=interrupts.DEADLINE):
        with interrupts.deadline(0.05), interrupts.raising(lambda name: Stop(name)):
            time.sleep(5)  # the stop arrives while "ranks run", and raises: never the 5 s
    assert interrupts.requested() == interrupts.DEADLINE


def test_a_deadline_outside_a_launch_is_recorded_and_disarmed_on_exit(owned):
    before = signal.getsignal(signal.SIGALRM)
    with interrupts.deadline(0.05):
        waited = time.monotonic()
        while interrupts.requested() is None and time.monotonic() - waited < 5:
            time.sleep(0.01)
    assert interrupts.requested() == interrupts.DEADLINE
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0) and signal.getsignal(signal.SIGALRM) is before
