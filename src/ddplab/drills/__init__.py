"""Fault drills: one file per drill, this registry in help order (CLI words: kill-rank or kill_rank).

Each drill module defines SUMMARY, EXPECT (the pass condition in words) and ``run(ctx) -> DrillOutcome``; the
shared inject -> observe -> judge steps are runner.py's, the harnesses beside it (child_launcher.py,
node_harness.py). A new drill is one module plus one registry line, or ``register`` from outside ddplab.
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
    "kill_node": "ddplab.drills.kill_node",
    "partition": "ddplab.drills.partition",
}
SHORT_SET = ("kill_rank", "kill_launcher", "late_rank", "stall")  # what `ddplab run` uses


def register(name: str, module: str) -> None:
    """Add the drill ``module`` defines (SUMMARY, EXPECT, run) under ``name``."""
    DRILLS[name] = module


def canonical(name: str) -> str:
    key = name.replace("-", "_")
    if key not in DRILLS:
        raise invalid_choice("drill", name, DRILLS)
    return key


def select(text: str) -> tuple[str, ...]:
    """The drills a command line names: 'all', 'short', or names separated by commas."""
    if text == "all":
        return tuple(DRILLS)
    if text == "short":
        return SHORT_SET
    return tuple(canonical(n) for n in text.split(","))


def get(name: str):
    return importlib.import_module(DRILLS[canonical(name)])
