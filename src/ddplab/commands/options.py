"""What every command that reads a Config shares: its options made from the Config's fields (basics/cli_options.py),
the launch options completed from the launcher that started ddplab, and what a measurement command does once its
Config is built."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from ..basics import cli_options
from ..report import terminal
from ..errors import UsageError, printable
from ..records.core import InSession
from ..basics.files import STDOUT
from ..basics.validators import check_choice

if TYPE_CHECKING:
    from ..records.config import LaunchOptions

OUTPUT_FORMATS = ("text", "json")  # every command that shows a result; `check` adds its runners' (check/formats)

# The names records/config.py cannot list (it must not import the vendor table): defined here, above the platform.
cli_options.define_vocabulary("device", lambda: ("auto", *_vendors()[1]))
cli_options.define_vocabulary("backend", lambda: ("auto", *_vendors()[0]))


def _vendors():
    from ..platform.vendors import KNOWN_BACKENDS, VENDORS

    return KNOWN_BACKENDS, VENDORS


def add_config_arguments(parser: argparse.ArgumentParser, config_cls: type, *,
                         json: str = "also write the JSON report here") -> None:
    """The Config's options, then --format text|json and --json PATH (``json``: its help): what goes to standard
    output, and a copy of the report elsewhere."""
    cli_options.add_arguments(parser, config_cls)
    parser.add_argument("--format", default="text", metavar="|".join(OUTPUT_FORMATS), help=cli_options.help_text(
        "what goes to standard output: text, the result as a person reads it, or json, the JSON report alone (what "
        "the command shows then goes to standard error)", "text"))
    add_json_argument(parser, json)


def add_json_argument(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--json", metavar="PATH", default=None, type=cli_options.path_argument("--json"),
                        help=cli_options.help_text(f"{help}; - is standard output, as --format json", "none"))


def json_on_stdout(args) -> bool:
    """Whether standard output carries the JSON report alone (--format json, or --json -)."""
    return getattr(args, "format", "text") == "json" or getattr(args, "json", None) == STDOUT


def check_output_options(args, formats: tuple[str, ...]) -> None:
    """--format is one of ``formats`` (a command's own, as `check`'s), and standard output has one writer: --json -
    beside a --format that writes there is refused (exit 2)."""
    fmt = getattr(args, "format", None)
    if fmt is None:
        return
    check_choice(fmt, "format", formats)
    if getattr(args, "json", None) == STDOUT and fmt != "text":
        raise UsageError("stdout-taken", f"--json - and --format {fmt} would both write to standard output; give "
                                         "--json a file, or use --format json alone")


def finish(report, render, args, console, run_dir: str | os.PathLike | None = None) -> int:
    """How a command that shows one report ends: the report in its run directory (where it has one), the --json copy,
    the JSON on standard output for --format json; then shown, and its verdict as the exit code (130 when a stop
    signal reached it). Written first: a verdict is printed only once its report is stored, never a PASS followed by
    a write error."""
    from ..basics.files import write_json

    record = None
    if run_dir:  # the run directory's layout, only for a command that has one
        from ..basics.rundir import REPORT_FILE

        record = Path(run_dir) / REPORT_FILE
    files = [path for path in (record, getattr(args, "json", None)) if path and str(path) != STDOUT]
    doc = report.to_json()
    for path in files + ([STDOUT] if json_on_stdout(args) else []):
        write_json(doc, path)
    render(report, console)
    if record is not None:
        console.print(f"report: {printable(str(record))}", markup=False, highlight=False, soft_wrap=True)
    return terminal.stopped_exit_code(report.verdict.exit_code)


def run_directory(config, record) -> Path | None:
    """Where a command's run lives: its ranks' run directory, or the one the command claimed for launches of its
    own (a drill's --run-dir); None for a command that starts nothing (env)."""
    session = record.session if isinstance(record, InSession) else None
    if session is not None and session.run_dir:
        return Path(session.run_dir)
    launch = getattr(config, "launch", None)
    return Path(launch.run_dir) if launch is not None and launch.run_dir else None


def config_from_args(config_cls: type, args, environ: Mapping[str, str] = os.environ):
    """The Config the command line asks for, its launch options completed from the launcher (``launch_options``)."""
    return cli_options.config_from_args(config_cls, args,
                                        resolve=lambda base, given: launch_options(base, given, environ))


def launch_options(base: LaunchOptions, given: dict, environ: Mapping[str, str] = os.environ) -> LaunchOptions:
    """The command's launch options (``base``: its defaults, ``given``: what its command line gave), completed
    from the launcher that started ddplab (torchrun, srun, mpirun: cluster/launchers.py), or refused (exit 2)
    when that launcher makes the run wrong. Under a launcher "not given" means "as the launcher says"."""
    from ..cluster import launchers

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
    """The add_arguments, config_from_args, validate and main of a command that runs one measurement."""
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        add_config_arguments(parser, measurement.Config)

    def from_args(args):
        return config_from_args(measurement.Config, args)

    def main(args, console) -> int:
        return run_measurement(measurement, from_args(args), render, args, console)

    return add_arguments, from_args, from_args, main


def run_measurement(measurement, config, render, args, console) -> int:
    """Run a measurement command's Config, report (into its run directory too), render, exit code."""
    from .. import measurements
    from ..job.session import Observer

    record = measurement.run(config, Observer(console if writes_the_report(config) else None))
    report = measurements.report(measurement, config, record)
    if not writes_the_report(config):
        return report.verdict.exit_code
    return finish(report, render, args, console, run_directory(config, record))
