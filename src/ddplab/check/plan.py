"""The check's stages after env, as the lab's profiles are made (lab/profiles.py): a list of Stages, each a
measurement's Config with the command line that reproduces it alone.

    pairwise  (only with --nnodes 2+) every pair of machines, first, while every machine starts at once
    storm     1,000 x 4-byte all_reduce
    sweep     all_reduce, all_gather, reduce_scatter, all_to_all at a few sizes, exact data checked
    ceiling   the device copy rate that busbw is held to (built-in rule: busbw as a share of it)
    drill     kill_rank: the killed rank is named and nothing is left behind

Sizes depend on what the ranks run on (SIZES): one rank per device on an accelerator goes to 256 MiB, where
busbw is near its plateau; ranks sharing one device (gloo stages through the host, about 2 GB/s) stop at 8 MiB,
the host CPU at 512 KiB, so that the whole check stays within its budget (<= 30 s on 1-2 devices, <= 60 s on 8).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..records.config import LaunchOptions
from ..measurements.ceiling import CeilingConfig
from ..measurements.drill import DrillConfig
from ..measurements.pairwise import PairwiseConfig
from ..measurements.storm import StormConfig
from ..measurements.sweep import SweepConfig
from ..lab.profiles import Machine, Stage
from ..basics.sizes import size_range

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
STORM_ITERS = 1000
# (begin, end, factor) per kind of placement: -b/-e/-f as nccl-tests spells them.
SIZES = {
    "per-device": ("8", "256M", 32),  # 8 B .. 256 MiB: 6 sizes
    "shared-device": ("8", "8M", 32),  # 8 B .. 8 MiB: 5 sizes
    "host": ("8", "512K", 16),  # 8 B .. 512 KiB: 5 sizes
}
# Host ranks measure a functional sweep, as the lab's quick profile does: few iterations, median of three.
HOST_SWEEP = dict(iters=5, warmup=1, repeat=3)
CEILING_BYTES = {"accelerator": (1 << 30, 256 << 20), "host": (64 << 20, 16 << 20)}  # device copy, host copy
DRILL_TIMEOUT_S = {"accelerator": 10.0, "host": 5.0}
PAIRWISE_SIZES = {"accelerator": ("8", "256M", 32), "host": ("8", "128K", 16)}


def kind_of(machine: Machine) -> str:
    """Which size table the sweep uses: one rank per device (2+ devices), ranks sharing one, or the host."""
    if machine.host_only:
        return "host"
    return "per-device" if machine.device_count >= 2 else "shared-device"


def sweep_sizes(kind: str) -> tuple[int, ...]:
    return tuple(size_range(*SIZES[kind]))


def every_sweep_size() -> list[int]:
    """Every size a check's sweep runs on some machine (what a thresholds file may name)."""
    return sorted({s for kind in SIZES for s in sweep_sizes(kind)})


def stages(machine: Machine, nproc: int, out: Path, deadline_s: float, across: LaunchOptions | None = None
           ) -> list[Stage]:
    """The stages after env, each with its own run directory under ``out`` and ddplab's supervisor armed.
    ``across``: the job's launch options when the check runs on several machines (pairwise between them)."""
    kind = kind_of(machine)
    host = "host" if machine.host_only else "accelerator"

    ranks = dict(nproc=machine.device_count, placement="per-device") if kind == "per-device" else dict(nproc=nproc)

    def launch(name: str) -> LaunchOptions:
        return LaunchOptions(device=machine.device, run_dir=str(out / name), hang_timeout_s=deadline_s, **ranks)

    plan: list[Stage] = []
    if across is not None and across.nnodes > 1:
        plan.append(Stage("pairwise", "pairwise", PairwiseConfig(
            launch=replace(across, device=machine.device, run_dir=str(out / "pairwise"), hang_timeout_s=deadline_s),
            sizes=tuple(size_range(*PAIRWISE_SIZES[host])))))
    device_bytes, host_bytes = CEILING_BYTES[host]
    return plan + [
        Stage("storm", "storm", StormConfig(launch=launch("storm"), iters=STORM_ITERS)),
        Stage("sweep", "sweep", SweepConfig(launch=launch("sweep"), ops=OPS, sizes=sweep_sizes(kind),
                                            **(HOST_SWEEP if kind == "host" else {}))),
        Stage("ceiling", "ceiling", CeilingConfig(device=machine.device, run_dir=str(out / "ceiling"),
                                                  bytes=device_bytes, host_bytes=host_bytes, iters=10)),
        Stage("drill", "drill", DrillConfig(
            launch=LaunchOptions(device=machine.device, run_dir=str(out / "drill"), timeout_s=DRILL_TIMEOUT_S[host]),
            drills=("kill_rank",)))]
