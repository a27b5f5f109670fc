"""Only the platform package names vendor devices; the environment shown is a whitelist."""

import re
from pathlib import Path

import pytest

import ddplab
from ddplab.platform import whitelisted_environ
from ddplab.platform.vendors import env_whitelisted

SRC = Path(ddplab.__file__).parent
VENDOR_WORDS = re.compile(r"\b(cuda|musa|npu|xpu|nvml|pynvml|torch_musa|torch_npu)\b", re.IGNORECASE)


def test_vendor_names_appear_only_in_platform_package():
    offenders = []
    for path in SRC.rglob("*.py"):
        if "platform" in path.relative_to(SRC).parts:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if VENDOR_WORDS.search(line):
                offenders.append(f"{path.relative_to(SRC)}:{n}: {line.strip()}")
    assert offenders == []


def test_environment_whitelist_keeps_knobs_and_drops_secrets():
    env = {"NCCL_DEBUG": "INFO", "TORCH_NCCL_BLOCKING_WAIT": "1", "HCCL_EXEC_TIMEOUT": "60",
           "CUDA_VISIBLE_DEVICES": "0", "MUSA_VISIBLE_DEVICES": "1", "TORCH_MCCL_BLOCKING_WAIT": "1",
           "AWS_SECRET_ACCESS_KEY": "x", "HOME": "/root", "PATH": "/bin", "GITHUB_TOKEN": "y"}
    kept = whitelisted_environ(env)
    assert set(kept) == {"NCCL_DEBUG", "TORCH_NCCL_BLOCKING_WAIT", "HCCL_EXEC_TIMEOUT", "CUDA_VISIBLE_DEVICES",
                         "MUSA_VISIBLE_DEVICES", "TORCH_MCCL_BLOCKING_WAIT"}


@pytest.mark.parametrize("name", ["RANKING_API_KEY", "DDPLAB_WEBHOOK_TOKEN", "GLOO_TOKEN", "NCCL_IB_PASSWORD",
                                  "TORCHELASTIC_AUTH", "HF_TOKEN", "GLOO_SESSION", "CUDA_COOKIE", "RANK_SECRET"])
def test_names_outside_the_exact_whitelist_are_not_shown(name):
    assert not env_whitelisted(name)


@pytest.mark.parametrize("name", ["NCCL_PROTO", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TORCHELASTIC_RUN_ID",
                                  "DDPLAB_RUN_ID", "ASCEND_RT_VISIBLE_DEVICES", "TORCH_NCCL_DUMP_ON_TIMEOUT"])
def test_the_knobs_ddplab_knows_are_shown(name):
    assert env_whitelisted(name)


def test_a_shown_variable_holding_a_credential_is_redacted():
    env = {"NCCL_DEBUG_FILE": "/tmp/nccl.log?token=QUJDREVGR0hJSktMTU5PUFFS", "NCCL_DEBUG": "INFO"}
    assert whitelisted_environ(env) == {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": "[redacted]"}
