"""The rank's beacon (supervision/beacon.py): it looks at torch.distributed without importing it, at any moment
of the main thread's `import torch` (a half-imported module reads as "not in a process group"; on 2x H200 every
rank of every supervised job once wrote beacon-error.txt with an AttributeError), and its own files never fail
the rank (issue 18: a full disk failed a job that had finished)."""

import json
import sys
import types

from ddplab.rundir import RunDir
from ddplab.supervision.beacon import Beacon


def _beacon(tmp_path) -> Beacon:
    return Beacon(RunDir.create(tmp_path / "job", "launch"), 0, 0, phase="running")


def test_a_half_imported_torch_distributed_is_not_a_process_group(tmp_path, monkeypatch):
    half_imported = types.ModuleType("torch.distributed")  # what sys.modules holds mid-import: no functions yet
    monkeypatch.setitem(sys.modules, "torch.distributed", half_imported)
    assert _beacon(tmp_path)._observe()["in_process_group"] is False


def test_an_initialised_process_group_is_seen(tmp_path, monkeypatch):
    ready = types.ModuleType("torch.distributed")
    ready.is_available = lambda: True
    ready.is_initialized = lambda: True
    monkeypatch.setitem(sys.modules, "torch.distributed", ready)
    assert _beacon(tmp_path)._observe()["in_process_group"] is True


def test_a_phase_is_written_atomically_with_what_the_beacon_sees(tmp_path):
    beacon = _beacon(tmp_path).start()
    try:
        beacon.phase("finished", exit_code=0)
        written = json.loads(beacon.path.read_text())
        assert (written["phase"], written["exit_code"], written["rank"]) == ("finished", 0, 0)
        assert written["where"]["frames"] and written["proc_start_ticks"] > 0
    finally:
        beacon.close()


def test_a_write_that_fails_degrades_supervision_never_the_rank(tmp_path, capsys):
    run = RunDir.create(tmp_path / "job", "launch")
    (run.ranks_dir / "0").write_text("a file where the rank's directory should be")  # every write under it fails
    beacon = Beacon(run, 0, 0, phase="running").start()  # no exception: the job goes on
    try:
        beacon.phase("in-collective")
        beacon.fail("RuntimeError: boom", 1)
        beacon.dump("req1")
        assert beacon.write_error is not None
        said = capsys.readouterr().err
        assert said.count("could not write its supervision files") == 1  # said once, not at every beat
    finally:
        beacon.close()
