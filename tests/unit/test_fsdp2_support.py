"""FSDP2 where this torch cannot run it is refused in one sentence, before torch fails inside fully_shard: on the
host torch 2.4.1 raised a CUDA driver error and 2.6.0 an AttributeError at the first forward (2.7.1 runs)."""

import pytest
import torch

from ddplab.errors import EnvironmentUnsupported, ExitCode
from ddplab.platform import fsdp2_unsupported
from ddplab.platform.vendors import HOST_CPU, INTEL, NVIDIA
from ddplab.workloads.ddp_train import Trainer, build_model


def test_the_host_needs_torch_2_7_and_other_devices_2_6():
    assert [fsdp2_unsupported(HOST_CPU.device_type, v) is None for v in ("2.4.1", "2.6.0", "2.7.1", "2.13.0")] \
        == [False, False, True, True]
    assert [fsdp2_unsupported(INTEL.device_type, v) is None for v in ("2.5.1+xpu", "2.6.0+xpu")] == [False, True]
    assert fsdp2_unsupported(NVIDIA.device_type, "2.4.1+cu121") is None


def test_a_model_is_not_sharded_on_the_host_by_a_torch_that_cannot(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.6.0+cu124")
    model, _ = build_model("mlp", 8)
    with pytest.raises(EnvironmentUnsupported) as refused:
        Trainer(model, torch.device(HOST_CPU.device_type), wrap="fsdp2")
    assert refused.value.exit_code == ExitCode.ENVIRONMENT
    assert str(refused.value).endswith("FSDP2 (fully_shard) on cpu needs torch 2.7 or newer; this is torch 2.6.0+cu124")
