"""The lab's stages per profile, as plain command lines (torchtitan-style recipes).

Each stage is the same `ddplab <command> ...` a user could type, so every number in a
run report can be reproduced by running that stage alone.
  quick - every stage, CI-sized: under a minute on a 2-core CPU machine
  full  - the complete GPU lab: every collective up to 1 GiB, 10,000-op storm, shared
          device with and without MPS, the short drill set; under 5 minutes on 1-2 H200
  soak  - storm and sweep repeated, to show jitter over time
"""

from __future__ import annotations

from dataclasses import dataclass

PROFILES = ("quick", "full", "soak")
SOAK_REPEATS = 5


@dataclass(frozen=True)
class Stage:
    name: str
    command: str  # a ddplab command: env, train, storm, ...
    argv: tuple[str, ...] = ()


def stages(profile: str, nproc: int, device_count: int, host_only: bool, has_daemon: bool) -> list[Stage]:
    multi = device_count >= 2 and not host_only
    per_dev = ("--per-device", "--nproc", str(device_count)) if multi else ("--nproc", str(nproc))
    out = [Stage("env", "env")]
    if profile == "soak":
        for i in range(1, SOAK_REPEATS + 1):
            out.append(Stage(f"storm-{i}", "storm", (*per_dev, "--iters", "10000")))
            out.append(Stage(f"sweep-{i}", "sweep", (*per_dev, "-b", "8", "-e", "64M", "-f", "4")))
        return out

    full = profile == "full"
    steps = "20" if full else "10"
    out.append(Stage("train-shared", "train", ("--nproc", str(nproc), "--share-device", "--steps", steps)))
    if multi:
        out.append(Stage("train-per-device", "train", (*per_dev, "--model", "mlp", "--steps", steps)))
    out.append(Stage("storm", "storm", (*per_dev, "--iters", "10000" if full else "1000")))
    if full and not host_only:
        out.append(Stage("storm-shared", "storm", ("--nproc", "2", "--share-device")))
        if has_daemon:
            out.append(Stage("storm-shared-mps", "storm", ("--nproc", "2", "--share-device", "--mps")))
    # -R 3 also on the host: one disturbed repetition on a busy CPU would otherwise show as a spike
    sweep = ("--ops", "all", "-b", "8", "-e", "1G", "-f", "2") if full else ("-b", "8", "-e", "1M", "-f", "4",
                                                                             "-n", "5", "-w", "1", "-R", "3")
    out.append(Stage("sweep", "sweep", (*per_dev, *sweep)))
    if full and not host_only:
        out.append(Stage("sweep-shared", "sweep", ("--nproc", "2", "--share-device", "-b", "8", "-e", "256M",
                                                   "-f", "4")))
    out.append(Stage("ceiling", "ceiling", ("--bytes", "4G" if full and not host_only else "64M",
                                            "--host-bytes", "256M" if full else "16M", "--iters", "10")))
    out.append(Stage("contention", "contention", ("--nproc", "2", "--seconds", "3" if full else "1")))
    if full and has_daemon:
        out.append(Stage("contention-mps", "contention", ("--nproc", "2", "--seconds", "3", "--mps")))
    drills = "kill_rank,kill_launcher,late_rank,stall" if full else "kill_rank,kill_launcher"
    out.append(Stage("drills", "drill", (drills, "--timeout", "10" if full else "5")))
    return out
