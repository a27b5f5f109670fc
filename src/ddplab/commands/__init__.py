"""Command registry: CLI word -> module. Dict order is help order.

A command module defines SUMMARY, EXAMPLES, add_arguments(parser), validate(args) (pure checks, raising UsageError
before anything starts) and main(args, console) -> exit code; the first paragraph of its docstring is for the user
(commands/help.py). Command modules import torch only inside functions, so `ddplab --help` is instant.
"""

from __future__ import annotations

import importlib

COMMANDS: dict[str, str] = {
    "run": "ddplab.commands.run",
    "check": "ddplab.commands.check",
    "env": "ddplab.commands.env",
    "train": "ddplab.commands.train",
    "storm": "ddplab.commands.storm",
    "sweep": "ddplab.commands.sweep",
    "pairwise": "ddplab.commands.pairwise",
    "ceiling": "ddplab.commands.ceiling",
    "contention": "ddplab.commands.contention",
    "compare": "ddplab.commands.compare",
    "drill": "ddplab.commands.drill",
    "launch": "ddplab.commands.launch",
    "clean": "ddplab.commands.clean",
    "report": "ddplab.commands.report",
}

# Commands that read files and processes only: they run beside any torch, or none (a report read on a laptop).
# Every other command refuses a torch older than torch_floor.FLOOR before it starts.
WITHOUT_TORCH = frozenset({"compare", "report", "clean"})


def load(name: str):
    return importlib.import_module(COMMANDS[name])


def render(report, console) -> None:
    """Show any report in the terminal as the command that wrote it does (`ddplab run`: its stage lines and
    verdict table; `compare`: its table, labelled with the files it compared)."""
    if report.command == "compare":
        load("compare").render(report, report.config.old, report.config.new, console)
        return
    load(report.command).render(report, console)

