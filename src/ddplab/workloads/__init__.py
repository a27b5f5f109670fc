"""Workloads a rank can run. Name -> module, imported lazily (torch stays out of --help).

Each module exposes ``run(ctx: worker.RankContext)``, which returns the rank's result record (records/).
"""

from __future__ import annotations

import importlib

from ..errors import invalid_choice

WORKLOADS: dict[str, str] = {
    "ddp_train": "ddplab.workloads.ddp_train",
    "storm": "ddplab.workloads.storm",
    "sweep": "ddplab.workloads.sweep",
    "ceiling": "ddplab.workloads.ceiling",
    "contention": "ddplab.workloads.contention",
    "pairwise": "ddplab.workloads.pairwise",
}


def get_workload(name: str):
    if name not in WORKLOADS:
        raise invalid_choice("workload", name, WORKLOADS)
    return importlib.import_module(WORKLOADS[name])
