"""The rank's beacon thread looks at torch.distributed without importing it, at any moment of the
main thread's `import torch`: a half-imported module must read as "not in a process group", not fail.
(On 2x H200 every rank of every supervised job wrote beacon-error.txt with an AttributeError.)"""

import sys
import types

from ddplab.job.beacon import Beacon
from ddplab.job.layout import JobDir


def _beacon(tmp_path) -> Beacon:
    job = JobDir.create(str(tmp_path / "job"))
    job.prepare_rank(0)
    return Beacon(job, rank=0, stack_signal=None, recorder_setting="default")


def test_a_half_imported_torch_distributed_is_not_a_process_group(tmp_path, monkeypatch):
    half_imported = types.ModuleType("torch.distributed")  # what sys.modules holds mid-import: no functions yet
    monkeypatch.setitem(sys.modules, "torch.distributed", half_imported)
    beacon = _beacon(tmp_path)
    beacon.beat(phase="importing")
    assert beacon.state["in_process_group"] is False
    assert beacon.state["phase"] == "importing"


def test_an_initialised_process_group_is_seen(tmp_path, monkeypatch):
    ready = types.ModuleType("torch.distributed")
    ready.is_available = lambda: True
    ready.is_initialized = lambda: True
    monkeypatch.setitem(sys.modules, "torch.distributed", ready)
    beacon = _beacon(tmp_path)
    beacon.beat()
    assert beacon.state["in_process_group"] is True
