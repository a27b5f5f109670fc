import pytest

import ddplab.supervision.watcher


@pytest.fixture
def stand_ins_never_answer(monkeypatch):
    """For a supervisor whose ranks are stand-ins (``sleep``) that never answer a dump request: the watcher's 3 s
    wait for their answers tests nothing there (ranks answering: test_job_boot.py, test_launch_cpu.py), nor does the
    declaring machine's 3 s wait for a machine that is not watching (a supervisor run alone)."""
    monkeypatch.setattr(ddplab.supervision.watcher, "DUMP_WAIT_S", 0.3)
    monkeypatch.setattr(ddplab.supervision.watcher, "FOLLOW_WAIT_S", 0.5)
