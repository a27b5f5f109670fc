"""The library: one module per measurement, each the same shape (records.hooks.Kind).

    NAME        the command word and the report's "command"
    SUMMARY     one line for --help and the docs
    Config      a frozen dataclass, validated on construction, whose fields make the command's options
    Record      the frozen results record (records/), flattened into the report's "results"
    run(config, observer=QUIET) -> Record       refuses (DdplabError) before it starts anything
    checks(record) -> list[Check]               the ONE rule: the report's verdict is the worst of these
    summary(record) -> str                      one line for the terminal and the lab's stage table
    config_as_run(config, record) -> Config     optional: the config with what was chosen at run time (sweep: -R)

`run`, `launch`, `clean` and `compare` write reports of the same shape (catalog.OTHER_KINDS). A new measurement is one
module here plus one registry line; ``register`` adds one from outside (a plug-in, a test) without touching commands,
checks, the HTML report or compare.
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
