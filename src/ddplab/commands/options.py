"""What every command that reads a Config shares: its options made from the Config's fields (cli_options.py),
the launch options completed from the launcher that started ddplab, and what a measurement command does once its
Config is built."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from typing import Mapping

from .. import cli_options
from ..cluster import launchers
from ..config import LaunchOptions

# The names config.py cannot list (it must not import the vendor table): defined here, above the platform.
cli_options.define_vocabulary("device", lambda: ("auto", *_vendors()[1]))
cli_options.define_vocabulary("backend", lambda: ("auto", *_vendors()[0]))


def _vendors():
    from ..platform.vendors import KNOWN_BACKENDS, VENDORS

    return KNOWN_BACKENDS, VENDORS


def add_config_arguments(parser: argparse.ArgumentParser, config_cls: type, *,
                         json: str | None = "write the JSON report here") -> None:
    """The Config's options, and --json PATH (the report, written at the end; ``json``: its help) unless None."""
    cli_options.add_arguments(parser, config_cls)
    if json:
        add_json_argument(parser, json)


def add_json_argument(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--json", metavar="PATH", default=None, type=cli_options.path_argument("--json"),
                        help=cli_options.help_text(help, "none"))


def config_from_args(config_cls: type, args, environ: Mapping[str, str] = os.environ):
    """The Config the command line asks for, its launch options completed from the launcher (``launch_options``)."""
    return cli_options.config_from_args(config_cls, args,
                                        resolve=lambda base, given: launch_options(base, given, environ))


def launch_options(base: LaunchOptions, given: dict, environ: Mapping[str, str] = os.environ) -> LaunchOptions:
    """The command's launch options (``base``: its defaults, ``given``: what its command line gave), completed
    from the launcher that started ddplab (torchrun, srun, mpirun: cluster/launchers.py), or refused (exit 2)
    when that launcher makes the run wrong. Under a launcher "not given" means "as the launcher says"."""
    where = launchers.resolve(launchers.detect(environ), launchers.Asked(
        nproc=given.get("nproc"), nnodes=given.get("nnodes"), rdzv_endpoint=given.get("rdzv_endpoint"),
        rdzv_host=given.get("rdzv_host")))
    if where.taken or where.notes:
        print("ddplab: " + "; ".join((*where.taken, *where.notes)), file=sys.stderr)
    return replace(base, **{**given, "nproc": where.nproc if where.nproc is not None else base.nproc,
                            "nnodes": where.nnodes, "rdzv_endpoint": where.rdzv_endpoint,
                            "rdzv_host": where.rdzv_host, "started_by": where.started_by})


def writes_the_report(config, environ: Mapping[str, str] = os.environ) -> bool:
    """Under torchrun every rank runs the command; global rank 0 writes the report and shows it."""
    launch = getattr(config, "launch", None)
    return launch is None or launch.started_by is None or environ.get("RANK", "0") == "0"


def measurement_command(measurement, render):
    """The add_arguments, config_from_args, validate and main of a command that runs one measurement (its Config's
    options and --json; ``render`` shows its report)."""
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        add_config_arguments(parser, measurement.Config)

    def from_args(args):
        return config_from_args(measurement.Config, args)

    def main(args, console) -> int:
        return run_measurement(measurement, from_args(args), render, args, console)

    return add_arguments, from_args, from_args, main


def run_measurement(measurement, config, render, args, console) -> int:
    """What a measurement command does once its Config is built: run it, report, render, exit code."""
    from .. import display, measurements
    from ..session import Observer

    record = measurement.run(config, Observer(console if writes_the_report(config) else None))
    report = measurements.report(measurement, config, record)
    if not writes_the_report(config):
        return report.verdict.exit_code
    return display.finish(report, render, args.json, console)
