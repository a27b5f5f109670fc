"""A run's cleanup (job/session._supervised): the guardian is told the run ended well only once the monitor is closed
and the sharing daemon stopped. If stopping the daemon raises (a second Ctrl+C during its quit), the guardian must
not hear "done", so that it ends the daemon itself once the launcher is gone."""

from types import SimpleNamespace

import pytest

import ddplab.platform
from ddplab.job import session
from ddplab.records.config import LaunchOptions


class _Ended(Exception):
    """What the job raised here: the cleanup runs on the way out."""


class _Guardian:
    told_done: list[bool] = []

    def __init__(self, run):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _Guardian.told_done.append(True)


class _Daemon:
    def __init__(self, stop_raises: bool):
        self.stop_raises = stop_raises

    def describe(self) -> str:
        return "a stand-in daemon"

    def stop(self):
        if self.stop_raises:
            raise KeyboardInterrupt  # the second Ctrl+C, while the daemon's quit command runs


@pytest.mark.parametrize("stop_raises", [False, True])
def test_the_guardian_hears_done_only_after_the_daemon_stopped(tmp_path, monkeypatch, stop_raises):
    _Guardian.told_done = []
    closed = []
    monkeypatch.setattr(session, "Guardian", _Guardian)
    monkeypatch.setattr(session, "start_sharing_daemon",
                        lambda opts, platform, placement, run: (placement, _Daemon(stop_raises)))
    monkeypatch.setattr(ddplab.platform, "open_monitor", lambda spec: SimpleNamespace(close=lambda: closed.append(1)))
    monkeypatch.setattr(session, "RankSampler", lambda *a, **k: None)
    monkeypatch.setattr(session, "where_to_listen", lambda *a, **k: None)
    monkeypatch.setattr(session, "lab_config", lambda *a, **k: None)
    monkeypatch.setattr(session, "job_spec", lambda *a, **k: None)

    def run_job(spec):
        raise _Ended

    monkeypatch.setattr(session, "run_job", run_job)
    placement = SimpleNamespace(nproc=1, device_type="cpu", env={})
    opts = LaunchOptions(nproc=1, run_dir=str(tmp_path / "run"))
    with pytest.raises(KeyboardInterrupt if stop_raises else _Ended):
        session._supervised(lambda platform, placement: ("x", (), {}, ""), opts, "t", session.QUIET, False,
                            (SimpleNamespace(spec=None), placement), controller=None,
                            sample_device_while_timing=False, rank_env=None)
    assert closed == [1]  # the monitor is closed either way
    assert _Guardian.told_done == ([] if stop_raises else [True])
