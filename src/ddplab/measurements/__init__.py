"""The library: one module per measurement, each the same shape.

    NAME        the command word and the report's "command"
    SUMMARY     one line for --help and the docs
    Config      a frozen dataclass, validated on construction, whose fields make the command's options
                (cli_options.py)
    Record      the frozen results record (records/), flattened into the report's "results"
    run(config, observer=QUIET) -> Record       refuses (DdplabError) before it starts anything
    checks(record) -> list[Check]               the ONE rule: the report's verdict is the worst of these
    summary(record) -> str                      one line for the terminal and the lab's stage table
    config_as_run(config, record) -> Config     optional: the config with what was chosen at run time filled
                                                in (sweep: -R per device), as the report writes it

Commands are arguments -> Config -> run -> render (commands/); the lab runs a profile's Configs
(lab.py, profiles.py). A new measurement is one module here plus one registry line; ``register`` adds
one from outside (a plug-in, or a test) without touching commands, checks, the HTML report or compare.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ..errors import invalid_choice
from ..records import Check, Report, Verdict

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
    if name in _registered:
        return _registered[name]
    if name not in MEASUREMENTS:
        raise invalid_choice("measurement", name, MEASUREMENTS)
    return importlib.import_module(MEASUREMENTS[name])


def verdict(measurement, record) -> Verdict:
    return Verdict.worst(c.verdict for c in measurement.checks(record))


def report(measurement, config, record) -> Report:
    """The JSON document of one measurement: its config, the platform, the record and the verdict its checks give."""
    as_run = getattr(measurement, "config_as_run", None)
    if as_run is not None:
        config = as_run(config, record)
    return Report(command=measurement.NAME, config=config, platform=platform_of(record), results=record,
                  verdict=verdict(measurement, record))


def platform_of(record):
    """The platform a record was measured on: its own, or its session's (None when read back from JSON)."""
    return getattr(record, "platform", None) or getattr(getattr(record, "session", None), "platform", None)


__all__ = ["Check", "MEASUREMENTS", "get", "register", "report", "verdict"]
