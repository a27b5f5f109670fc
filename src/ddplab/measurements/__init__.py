"""The library: one module per measurement, each the same shape.

    NAME        the command word and the report's "command"
    SUMMARY     one line for --help and the docs
    Config      a frozen dataclass (config.py), validated on construction
    Record      the frozen results record (records/), flattened into the report's "results"
    run(config, observer=QUIET) -> Record       refuses (DdplabError) before it starts anything
    checks(record) -> list[Check]               the ONE rule: the report's verdict is the worst of these
    summary(record) -> str                      one line for the terminal and the lab's stage table
    config_as_run(config, record) -> Config     optional: the config with what was chosen at run time filled
                                                in (sweep: -R per device), as the report writes it

Commands are arguments -> Config -> run -> render (commands/); the lab runs a profile's Configs
(lab.py, profiles.py). A new measurement is one module here plus one registry line; ``register`` adds
one from outside (a plug-in, or a test) without touching commands, checks, the HTML report or compare.
This registry is also the catalog a report is read with (``types_for``, ``report_from_json``): records name
no command's types themselves.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ..errors import invalid_choice
from ..records import Check, RecordError, Report, Verdict

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
# Commands whose reports are not measurements: command -> (config module, class, results module, class).
_OTHER_REPORTS: dict[str, tuple[str, str, str, str]] = {
    "run": ("ddplab.config", "RunConfig", "ddplab.records.run", "RunRecord"),
    "compare": ("ddplab.records.compare", "CompareConfig", "ddplab.records.compare", "CompareRecord"),
    "clean": ("ddplab.config", "CleanConfig", "ddplab.records.clean", "CleanRecord"),
    "launch": ("ddplab.config", "LaunchConfig", "ddplab.records.launch", "LaunchRecord"),
    "check": ("ddplab.check.config", "CheckConfig", "ddplab.check.record", "CheckRecord"),
}


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


def types_for(command: str, where: str = "$.command") -> tuple[type, type, type]:
    """(Config class, results class, platform class) of a command's report; RecordError for a command ddplab
    never wrote. The platform is the probed machine's, or what the record says it holds (a job's launcher host)."""
    from ..platform import Platform

    if command in MEASUREMENTS:
        config_cls, results_cls = get(command).Config, get(command).Record
    elif command in _OTHER_REPORTS:
        config_module, config_name, results_module, results_name = _OTHER_REPORTS[command]
        config_cls = getattr(importlib.import_module(config_module), config_name)
        results_cls = getattr(importlib.import_module(results_module), results_name)
    else:
        raise RecordError(where, f"a ddplab command ({', '.join(sorted({*MEASUREMENTS, *_OTHER_REPORTS}))})", command)
    return config_cls, results_cls, getattr(results_cls, "platform_type", Platform)


def report_from_json(doc, where: str = "$") -> Report:
    """Any report ddplab wrote, rebuilt and validated through this catalog (not judged again: records/load.py
    reads a file and judges it)."""
    return Report.from_json(doc, where, types_for)


def verdict(measurement, record) -> Verdict:
    return Verdict.worst(c.verdict for c in measurement.checks(record))


def report(measurement, config, record) -> Report:
    """The JSON document of one measurement: its config, the platform, the record, its checks and the verdict
    they give."""
    as_run = getattr(measurement, "config_as_run", None)
    if as_run is not None:
        config = as_run(config, record)
    checks = tuple(measurement.checks(record))
    return Report(command=measurement.NAME, config=config, platform=platform_of(record), results=record,
                  verdict=Verdict.worst(c.verdict for c in checks), checks=checks)


def platform_of(record):
    """The platform a record was measured on: its own, or its session's (None when read back from JSON)."""
    return getattr(record, "platform", None) or getattr(getattr(record, "session", None), "platform", None)


__all__ = ["Check", "MEASUREMENTS", "get", "register", "report", "report_from_json", "types_for", "verdict"]
