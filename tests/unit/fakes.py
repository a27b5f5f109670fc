"""Hand-made probes for platforms this machine does not have (MUSA, Ascend, XPU, NVIDIA)."""

from __future__ import annotations

import io

from ddplab.platform import DeviceInfo, Probe


def probe(accelerator: str | None, count: int = 1, **overrides) -> Probe:
    backends = {"gloo": True, "nccl": False, "mccl": False, "hccl": False, "xccl": False, "mpi": False,
                "ucc": False}
    backends.update(overrides.pop("backends", {}))
    fields = dict(
        torch_version="2.11.0",
        accelerator=accelerator,
        device_count=count,
        devices=tuple(DeviceInfo(i, f"{accelerator} device", 150 * 2**30, 140 * 2**30) for i in range(count)),
        backends_available=backends,
        hostname="testhost",
        python_version="3.12.3",
    )
    fields.update(overrides)
    return Probe(**fields)


MPS_CONTROL = "/usr/bin/nvidia-cuda-mps-control"


def nvidia(count: int = 1, loaded: str | None = "2.28.9", built: str = "2.28.9", mps: bool = False,
           mps_control: bool = False) -> Probe:
    """``mps``: a (user's) MPS daemon is running; ``mps_control``: its control binary is on PATH."""
    return probe("cuda", count, backends={"nccl": True}, collective_built_version=built,
                 collective_loaded_version=loaded,
                 collective_loaded_path="/site-packages/nvidia/nccl/lib/libnccl.so.2" if loaded else None,
                 sharing_daemon_running=mps, sharing_daemon_control_path=MPS_CONTROL if mps_control else None,
                 torch_default_backend="nccl")


def musa(count: int = 1) -> Probe:
    return probe("musa", count, backends={"mccl": True}, plugins={"torch_musa": "2.7.1"},
                 torch_default_backend=None)


def ascend(count: int = 1) -> Probe:
    return probe("npu", count, backends={"hccl": True}, plugins={"torch_npu": "2.6.0"},
                 torch_default_backend="hccl")


def intel(count: int = 1) -> Probe:
    return probe("xpu", count, backends={"xccl": True}, torch_default_backend="xccl")


def cpu_only() -> Probe:
    return probe(None, 0, host_memory=(24 * 2**30, 20 * 2**30))


def env_screen(monkeypatch, probe_: Probe) -> tuple[dict, str]:
    """`ddplab env` on a machine described by ``probe_``: its JSON document and what it prints."""
    from rich.console import Console

    import ddplab.platform
    from ddplab import measurements
    from ddplab.commands import env as env_command
    from ddplab.measurements.env import EnvConfig

    monkeypatch.setattr(ddplab.platform, "gather_probe", lambda with_memory=True: probe_)
    env, config = measurements.get("env"), EnvConfig()
    report = measurements.report(env, config, env.run(config))
    console = Console(width=400, record=True, highlight=False, file=io.StringIO())
    env_command.render(report, console)
    return report.to_json(), console.export_text()
