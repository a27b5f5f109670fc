"""The lab's stages per profile, as Python recipes (torchtitan-style): a list of (stage name, measurement,
Config). Each stage's Config has a command line (``config.to_argv()``), shown beside the stage in the report,
so every number in a run report can be reproduced by running that stage alone.
  quick - every stage, CI-sized: under a minute on a 2-core CPU machine
  full  - the complete GPU lab: every collective up to 1 GiB, 10,000-op storm, a shared device in the
          fastest setup and time-sliced (--no-mps), the short drill set; under 5 minutes on 1-2 H200
  soak  - storm and sweep repeated, to show jitter over time
The full profile also times the collective library alone beside torch (``--engine both``); where no binding can
run, those stages refuse before starting anything and the lab records them as skipped with the reason. On one
device the sweep's ranks share it; where they would share it through gloo, every call stages device tensors
through host memory, and the sweep stops at ``HOST_STAGED_MAX`` instead of 1 GiB to keep the profile within its
5 minutes. On the host CPU gloo carries every byte through host memory too: the sweeps stop at
``HOST_STAGED_MAX`` there as well, or lower where the memory plan says the ranks could not hold a size now
(``host_sweep_bound``), and the lab says so before its stages start (``host_note``); unbounded, it never finished.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..collectives import COLLECTIVES
from ..records.config import LaunchOptions
from ..measurements.ceiling import CeilingConfig
from ..measurements.contention import ContentionConfig
from ..measurements.drill import DrillConfig
from ..measurements.storm import StormConfig
from ..measurements.sweep import SweepConfig
from ..measurements.train import TrainConfig
from ..drills import SHORT_SET as SHORT_DRILLS
from ..errors import DdplabError
from ..platform.memory_plan import read_machine
from ..records.memory import MachineMemory
from ..basics.sizes import human_bytes, parse_size, size_range

SOAK_REPEATS = 5
QUICK_DRILLS = ("kill_rank", "kill_launcher")
HOST_STAGED_MAX = "64M"  # the full sweep's largest size where gloo carries the data through host memory
FULL_MAX = "1G"  # the full sweep's largest size on an accelerator


@dataclass(frozen=True)
class Stage:
    name: str
    measurement: str  # a name in measurements.MEASUREMENTS, which is also its command word
    config: Any

    @property
    def argv(self) -> list[str]:
        return self.config.to_argv()

    @property
    def command_line(self) -> str:
        return " ".join(["ddplab", self.measurement, *self.argv])


@dataclass(frozen=True)
class Machine:
    """What a profile needs to know about the machine (from the env stage)."""

    device: str  # the --device the user gave (auto: what was detected)
    device_count: int
    host_only: bool
    has_daemon: bool  # a sharing daemon this machine can start (its control binary is on PATH)
    # 2 ranks sharing a device would run gloo on device tensors, staged through host memory (job/policy.py decides)
    shares_through_host: bool = False
    # On the host CPU: the host memory its ranks may take now (memory_plan.read_machine); None: not read
    host_memory: MachineMemory | None = None

    @classmethod
    def of(cls, platform, device: str) -> "Machine":
        if platform is None:
            return cls(device, 1, True, False)
        return cls(device, platform.device_count, platform.host_only,
                   bool(platform.sharing_daemon and platform.sharing_daemon_control_path),
                   shares_through_host=_shares_through_host(platform, device),
                   host_memory=read_machine() if platform.host_only else None)


def _shares_through_host(platform, device: str) -> bool:
    """What the placement policy would choose for 2 ranks on one device of this machine: gloo on device tensors?"""
    from ..platform.memory_plan import Route
    from ..job.policy import plan

    if platform.host_only:
        return False
    try:
        placement = plan(LaunchOptions(device=device, nproc=2, placement="shared"), platform)
    except DdplabError:  # no setup for shared ranks here: the stages say so when they run
        return False
    return Route.of(placement.backend, placement.host_only).staged


def kinds(profile: str) -> tuple[str, ...]:
    """The measurements a profile's stages use, in order (``run --only`` picks among them): the same on every
    machine, which adds stages of kinds the profile has, never a kind (tests/unit/test_profile_kinds.py)."""
    plan = stages(profile, 2, Machine("cpu", 1, True, False), Path("."), 1.0)
    return tuple(dict.fromkeys(stage.measurement for stage in plan))


def engine_stages(per_device, top: str | int = FULL_MAX) -> list[Stage]:
    """A storm and a sweep through both engines: what torch adds per call, at every size up to ``top`` (-f 4: the
    added cost is a small-message story, and this keeps the stage near the plain sweep's length)."""
    return [Stage("storm-engines", "storm", StormConfig(launch=per_device("storm-engines"), engine="both")),
            Stage("sweep-engines", "sweep", SweepConfig(launch=per_device("sweep-engines"), ops=tuple(COLLECTIVES),
                                                            sizes=tuple(size_range("8", str(top), 4.0)),
                                                            engine="both"))]


@dataclass(frozen=True)
class HostSweepBound:
    """The full profile's largest sweep size on the host CPU, and why (``host_sweep_bound``)."""

    top: int  # bytes; 0 where not even the smallest size fits (the sweep then refuses itself when it runs)
    reason: str


def host_sweep_bound(machine: Machine, nproc: int) -> HostSweepBound:
    """On the host CPU: HOST_STAGED_MAX, or the last size below it whose most demanding collective the machine's
    ranks can hold in host memory now (the plan the ranks apply to every size, made before the run)."""
    from ..measurements import sweep

    cap = parse_size(HOST_STAGED_MAX)
    config = SweepConfig(launch=LaunchOptions(device=machine.device, nproc=nproc), ops=tuple(COLLECTIVES),
                         sizes=tuple(size_range("8", HOST_STAGED_MAX, 2.0)))
    speed = (f"gloo carries every byte through host memory at CPU speed ({HOST_STAGED_MAX} is the profile's cap "
             f"for that, as where ranks share a device through gloo)")
    if machine.host_memory is None or machine.host_memory.host_available_bytes is None:
        return HostSweepBound(cap, f"{speed}; the host's memory could not be read")
    bound = sweep.host_sizes_that_fit(config, machine.host_memory)
    if bound.refused is None:
        return HostSweepBound(cap, f"{speed}; the memory plan fits every collective up to it "
                                   f"({human_bytes(machine.host_memory.host_available_bytes)} available)")
    top = max(bound.sizes, default=0)
    return HostSweepBound(top, f"the memory plan: {human_bytes(bound.refused)} {bound.fit.reason}")


def host_note(profile: str, machine: Machine, nproc: int) -> str | None:
    """What the full profile does on the host CPU, said before its stages start; None elsewhere."""
    if profile != "full" or not machine.host_only:
        return None
    bound = host_sweep_bound(machine, nproc)
    if bound.top == 0:
        sizes = "its sweeps cannot hold even their smallest size, and refuse to run"
    else:
        sizes = f"its sweeps stop at {human_bytes(bound.top)}, not {human_bytes(parse_size(FULL_MAX))}"
    return (f"full profile on the host CPU (no accelerator): every stage of the profile runs, but {sizes}: "
            f"{bound.reason}. The library engine's stages are skipped where no library binding exists.")


def stages(profile: str, nproc: int, machine: Machine, out: Path, deadline_s: float) -> list[Stage]:
    """The stages after env, each with its own run directory under ``out`` and ddplab's supervisor armed."""

    def launch(name: str, **kw) -> LaunchOptions:
        return LaunchOptions(device=machine.device, run_dir=str(out / name), hang_timeout_s=deadline_s, **kw)

    multi = machine.device_count >= 2 and not machine.host_only
    full = profile == "full"

    def per_device(name: str) -> LaunchOptions:
        return launch(name, nproc=machine.device_count, placement="per-device") if multi else launch(name, nproc=nproc)

    if profile == "soak":
        return [stage for i in range(1, SOAK_REPEATS + 1) for stage in (
            Stage(f"storm-{i}", "storm", StormConfig(launch=per_device(f"storm-{i}"))),
            Stage(f"sweep-{i}", "sweep", SweepConfig(launch=per_device(f"sweep-{i}"),
                                                     sizes=tuple(size_range("8", "64M", 4.0)))))]

    steps = 20 if full else 10
    out_stages = [Stage("train-shared", "train", TrainConfig(
        launch=launch("train-shared", nproc=nproc, placement="shared"), steps=steps))]
    if multi:
        out_stages.append(Stage("train-per-device", "train", TrainConfig(
            launch=per_device("train-per-device"), model="mlp", steps=steps)))
    out_stages.append(Stage("storm", "storm", StormConfig(launch=per_device("storm"),
                                                              iters=10_000 if full else 1000)))
    if full and not machine.host_only:
        # The fastest setup for ranks sharing a device (with the sharing daemon where it can be had), and, for
        # the seed report's 3.2, the same ranks time-slicing the device.
        out_stages.append(Stage("storm-shared", "storm", StormConfig(
            launch=launch("storm-shared", nproc=2, placement="shared"))))
        if machine.has_daemon:
            out_stages.append(Stage("storm-shared-no-mps", "storm", StormConfig(
                launch=launch("storm-shared-no-mps", nproc=2, placement="shared", sharing_daemon="off"),
                iters=1000)))
    top: str | int = FULL_MAX
    if full and machine.host_only:
        top = max(host_sweep_bound(machine, nproc).top, 8)  # below 8 B the sweep refuses itself when it runs
    elif full and machine.shares_through_host and not multi:
        top = HOST_STAGED_MAX
    if full:
        sweep = SweepConfig(launch=per_device("sweep"), ops=tuple(COLLECTIVES),
                                sizes=tuple(size_range("8", str(top), 2.0)))
    else:
        sweep = SweepConfig(launch=per_device("sweep"), sizes=tuple(size_range("8", "1M", 4.0)), iters=5,
                                warmup=1, repeat=3)
    out_stages.append(Stage("sweep", "sweep", sweep))
    if full and multi:  # on one device the sweep above already is the shared-device sweep
        out_stages.append(Stage("sweep-shared", "sweep", SweepConfig(
            launch=launch("sweep-shared", nproc=2, placement="shared"), sizes=tuple(size_range("8", "256M", 4.0)))))
    if full:
        out_stages += engine_stages(per_device, top if machine.host_only else FULL_MAX)
    big = full and not machine.host_only
    out_stages.append(Stage("ceiling", "ceiling", CeilingConfig(
        device=machine.device, run_dir=str(out / "ceiling"), bytes=(4 << 30) if big else (64 << 20),
        host_bytes=(256 << 20) if full else (16 << 20), iters=10)))
    out_stages.append(Stage("contention", "contention", ContentionConfig(
        launch=launch("contention", nproc=2), seconds=3.0 if full else 1.0)))
    if full and machine.has_daemon:
        out_stages.append(Stage("contention-mps", "contention", ContentionConfig(
            launch=launch("contention-mps", nproc=2, sharing_daemon="on"), seconds=3.0)))
    drills = SHORT_DRILLS if full else QUICK_DRILLS
    timeout = 10.0 if full else 5.0
    out_stages.append(Stage("drills", "drill", DrillConfig(
        launch=LaunchOptions(device=machine.device, run_dir=str(out / "drills"), timeout_s=timeout),
        drills=drills)))
    return out_stages
