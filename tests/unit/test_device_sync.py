"""Waiting for a device goes through the device's torch module, which every torch we support has: the drills once
called ``torch.accelerator.synchronize``, which torch 2.4 and 2.5 lack, on their device paths only (CI has none)."""

from pathlib import Path

import torch

import ddplab
from ddplab.platform import synchronize_device

SRC = Path(ddplab.__file__).parent


class _DeviceModule:
    def __init__(self):
        self.synchronized: list[int | None] = []

    def synchronize(self, index=None):
        self.synchronized.append(index)


def test_a_device_is_synchronized_through_its_module_on_a_torch_without_torch_accelerator(monkeypatch):
    module = _DeviceModule()
    asked: list[str] = []
    monkeypatch.setattr(torch, "get_device_module", lambda kind: asked.append(kind) or module)
    monkeypatch.delattr(torch, "accelerator", raising=False)
    synchronize_device(torch.device("xpu", 1))
    synchronize_device(torch.device("cpu"))  # the host: nothing queued, nothing asked
    synchronize_device(None)
    assert (asked, module.synchronized) == (["xpu"], [1])


def test_no_code_calls_torch_accelerator_synchronize():
    callers = [str(path.relative_to(SRC)) for path in SRC.rglob("*.py")
               if "torch.accelerator.synchronize" in path.read_text()]
    assert callers == []
