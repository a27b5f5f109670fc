"""The device and backend the drills' training script picks where no plan says (`ddplab launch -m --
ddplab.drills.script`): the machine's accelerator on every torch ddplab supports, else the host with gloo. Each
test plays one torch release's ``torch.accelerator`` (read in its sources) on this machine's torch."""

import pytest
import torch
import torch.distributed

from ddplab.basics.rundir import PLACEMENT_ENV
from ddplab.drills import script


class _DeviceModule:
    def __init__(self, count: int):
        self.count = count
        self.current: list[int] = []

    def is_available(self) -> bool:
        return self.count > 0

    def device_count(self) -> int:
        return self.count

    def set_device(self, index: int) -> None:
        self.current.append(index)


class _AcceleratorWithoutDevice:
    """torch.accelerator on a host with no device, torch built for one (PyPI's wheels are)."""

    def __init__(self, release: tuple[int, int]):
        self.release = release

    def is_available(self) -> bool:
        return False

    def current_accelerator(self):
        if self.release < (2, 7):
            raise RuntimeError("Cannot access accelerator device when none is available.")
        return torch.device("xpu")  # from 2.7: the accelerator torch was built for, present or not

    def device_count(self) -> int:
        if self.release < (2, 7):
            return 0
        raise RuntimeError("Found no driver on your system.")  # from 2.7 the count initialises the device


@pytest.fixture
def unplanned(monkeypatch):
    monkeypatch.delenv(PLACEMENT_ENV, raising=False)
    monkeypatch.setenv("LOCAL_RANK", "3")


@pytest.mark.parametrize("release", [(2, 6), (2, 7)])
def test_a_host_without_a_device_trains_on_the_host_with_gloo(unplanned, monkeypatch, release):
    monkeypatch.setattr(torch, "accelerator", _AcceleratorWithoutDevice(release), raising=False)
    assert script._device_and_backend() == (torch.device("cpu"), "gloo", None)


def test_a_torch_without_torch_accelerator_still_finds_the_devices(unplanned, monkeypatch):
    """torch 2.4 and 2.5: no torch.accelerator; the device's own module says what there is, and torch 2.4's map of
    default backends names cpu and cuda only: the vendor's backend is taken for any other device."""
    module = _DeviceModule(count=2)
    monkeypatch.delattr(torch, "accelerator", raising=False)
    monkeypatch.setattr(torch.distributed.Backend, "default_device_backend_map", {"cpu": "gloo", "cuda": "nccl"})
    monkeypatch.setattr(torch, "xpu", module)
    monkeypatch.setattr(torch, "get_device_module", lambda kind: module)
    device, backend, cap = script._device_and_backend()
    assert (device, backend, cap, module.current) == (torch.device("xpu", 1), "xccl", None, [1])


def test_the_accelerate_job_asks_for_the_device_on_a_torch_without_torch_accelerator(unplanned, monkeypatch):
    """Accelerate is told to stay on the host only where there is no accelerator: on torch 2.4 and 2.5 it once
    always was, a GPU beside it or not."""
    accelerate = pytest.importorskip("accelerate")
    from ddplab.drills import accelerate_job

    asked: list[bool] = []

    class _Stop(Exception):
        pass

    def accelerator(cpu: bool):
        asked.append(cpu)
        raise _Stop

    monkeypatch.delattr(torch, "accelerator", raising=False)
    monkeypatch.setattr(torch, "xpu", _DeviceModule(count=1))
    monkeypatch.setattr(accelerate, "Accelerator", accelerator)
    with pytest.raises(_Stop):
        accelerate_job.main([])
    assert asked == [False]
