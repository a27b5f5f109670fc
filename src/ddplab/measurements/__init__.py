"""The library: one module per measurement, each the same shape (records.hooks.Kind).

    NAME        the command word and the report's "command"
    SUMMARY     one line for --help and the docs
    Config      a frozen dataclass, validated on construction, whose fields make the command's options
                (basics/cli_options.py)
    Record      the frozen results record (records/), flattened into the report's "results"
    run(config, observer=QUIET) -> Record       refuses (DdplabError) before it starts anything
    checks(record) -> list[Check]               the ONE rule: the report's verdict is the worst of these
    summary(record) -> str                      one line for the terminal and the lab's stage table
    config_as_run(config, record) -> Config     optional (records.hooks.ChoosesAtRun): the config with what was
                                                chosen at run time filled in (sweep: -R per device), as the
                                                report writes it

The commands that are not a lab stage but write a report have the same shape (catalog.OTHER_KINDS): the lab
itself (`run`), `launch`, `clean` and `compare`. Every report is made by one function,
``make_report(kind, config, record)`` (records/core.py), and read back through the kind's Config and Record
(reading/catalog.py, the catalog of every report's types).

Commands are arguments -> Config -> run -> render (commands/); the lab runs a profile's Configs
(lab/run.py, lab/profiles.py). A new measurement is one module here plus one registry line; ``register`` adds
one from outside (a plug-in, or a test) without touching commands, checks, the HTML report or compare.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ..errors import invalid_choice
from ..records import Check
from ..records.core import make_report, platform_of, verdict_of

MEASUREMENTS: dict[str, str] = {
    "env": "ddplab.measurements.env",
    "train": "ddplab.measurements.train",
    "storm": "ddplab.measurements.storm",
    "sweep": "ddplab.measurements.sweep",
    "ceiling": "ddplab.measurements.ceiling",
    "contention": "ddplab.measurements.contention",
    "drill": "ddplab.measurements.drill",
    "pairwise": "ddplab.measurements.pairwise",
}
_registered: dict[str, ModuleType] = {}


def register(module) -> None:
    """Add a measurement (any object with the shape above) under its NAME."""
    _registered[module.NAME] = module
    MEASUREMENTS.setdefault(module.NAME, f"<registered {module.NAME}>")


def get(name: str):
    """The measurement named."""
    if name in _registered:
        return _registered[name]
    if name not in MEASUREMENTS:
        raise invalid_choice("measurement", name, MEASUREMENTS)
    return importlib.import_module(MEASUREMENTS[name])


verdict = verdict_of
report = make_report  # the JSON document of one measurement: its config, the platform, the record, its checks

__all__ = ["Check", "MEASUREMENTS", "get", "make_report", "platform_of", "register", "report", "verdict"]
