"""Fault drills: one file per drill, this registry in help order. CLI words accept
kebab-case (kill-rank) and snake_case (kill_rank).

Each module defines SUMMARY, EXPECT (the pass condition in words) and
run(opts: common.DrillOptions, console) -> dict (the drill's results, with a verdict).
"""

from __future__ import annotations

import importlib

from ..errors import invalid_choice

DRILLS: dict[str, str] = {
    "kill_rank": "ddplab.drills.kill_rank",
    "kill_launcher": "ddplab.drills.kill_launcher",
    "interrupt": "ddplab.drills.interrupt",
    "late_rank": "ddplab.drills.late_rank",
    "stall": "ddplab.drills.stall",
    "straggler": "ddplab.drills.straggler",
    "desync": "ddplab.drills.desync",
    "oom": "ddplab.drills.oom",
}


def canonical(name: str) -> str:
    key = name.replace("-", "_")
    if key not in DRILLS:
        raise invalid_choice("drill", name, DRILLS)
    return key


def get(name: str):
    return importlib.import_module(DRILLS[canonical(name)])
