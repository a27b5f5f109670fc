"""Check that this node is fit for training, and say so in the language of the health-check runner that
calls it: a Nagios or Slurm status line, a node-problem-detector message, a Prometheus textfile, JUnit XML or JSON.
It runs a short storm, a sweep with exact data, the copy ceiling and one drill, and holds the results to a
thresholds file, a good node's report or the built-in bounds.

`ddplab check`: env and leftovers -> a short storm -> a sweep of four collectives with exact data -> the copy
ceiling -> one kill_rank drill; with --nnodes, pairwise. src/ddplab/check/ holds the logic; this module reads the
command line.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from pathlib import Path

from ..basics import cli_options
from ..check import formats
from ..check.config import CheckConfig
from . import options

SUMMARY = "node acceptance check for fleet runners: Nagios, node-problem-detector, Slurm, Prometheus, JUnit"
OUTPUT_FORMATS = formats.FORMATS  # what --format may say (cli.py checks it, as every command's)
# Options spelt out in full: runner_error reads --format, --junit... of a refused command line as argparse would.
PARSER_OPTIONS = {"allow_abbrev": False}
EXAMPLES = (  # shown by --help (commands.help_epilog)
    ("ddplab check", "check this node against the built-in bounds"),
    ("ddplab check --format nagios --thresholds thresholds.toml", "one Nagios status line, held to your bounds"),
    ("ddplab check --baseline good.json --tolerance 5%", "hold this node to a good node's report"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    cli_options.add_arguments(parser, CheckConfig)
    # What goes where: the runner's language on stdout, and the files its collectors read (not the check's Config).
    parser.add_argument("--format", default="text", metavar="|".join(formats.FORMATS),
                        help=cli_options.help_text(
                            "what goes to stdout, and which exit codes: text (ddplab's: 0 pass or warn, 1 fail, "
                            "2 usage, 3 cannot run or stopped by --deadline, 130 stopped by a signal), json (the "
                            "report; the same codes), nagios (one status line with perfdata; 0 OK, 1 WARNING, 2 "
                            "CRITICAL, 3 UNKNOWN), npd (node-problem-detector: one message line; 0 OK or WARNING, "
                            "1 CRITICAL, 2 UNKNOWN)", "text"))
    parser.add_argument("--write-baseline", metavar="PATH", default=None,
                        type=cli_options.path_argument("--write-baseline"),
                        help=cli_options.help_text("also write the report here, to hold other nodes to", "none"))
    parser.add_argument("--textfile-dir", metavar="DIR", default=None, type=cli_options.path_argument("--textfile-dir"),
                        help=cli_options.help_text("write ddplab_check.prom here for node_exporter's textfile "
                                                   "collector", "none"))
    parser.add_argument("--junit", metavar="PATH", default=None, type=cli_options.path_argument("--junit"),
                        help=cli_options.help_text("write JUnit XML here, one testcase per check", "none"))
    options.add_json_argument(parser, "also write the JSON report here")


def config_from_args(args, environ=os.environ) -> CheckConfig:
    from ..cluster import launchers
    from ..errors import UsageError

    given = cli_options.values_given(CheckConfig, args)
    where = launchers.resolve(launchers.detect(environ), launchers.Asked(
        nproc=None, nnodes=given.get("nnodes"), rdzv_endpoint=given.get("rdzv_endpoint"),
        rdzv_host=given.get("rdzv_host")))
    if where.started_by is not None:
        raise UsageError("not-under-torchrun", "ddplab check starts ranks of its own: run it once per machine "
                                               "(under srun or by hand), not as torchrun's workers")
    return CheckConfig(**{**given, "nnodes": where.nnodes, "rdzv_endpoint": where.rdzv_endpoint,
                          "rdzv_host": where.rdzv_host})


def expectations_of(config: CheckConfig):
    """The thresholds file and the baseline, read and checked (exit 2 naming the file, the key, what is valid)."""
    from ..check import baseline, thresholds
    from ..check.judge import Expectations

    return Expectations(
        thresholds=thresholds.load(config.thresholds) if config.thresholds else None,
        baseline=baseline.load(config.baseline, config.tolerance, config.critical_tolerance)
        if config.baseline else None)


def validate(args) -> CheckConfig:
    from ..basics.files import check_output_dir, check_output_file

    config = config_from_args(args)  # --json - beside a --format that writes stdout: refused by cli.py
    expectations_of(config)
    if config.from_report:
        from ..reading.catalog import read_report

        read_report(config.from_report)
    elif config.out:
        from .run import check_out_dir

        check_out_dir(Path(config.out))
    for path, flag in ((args.junit, "--junit"), (args.write_baseline, "--write-baseline")):
        if path:
            check_output_file(path, flag)
    if args.textfile_dir:
        check_output_dir(args.textfile_dir, "--textfile-dir")
        _require_prometheus_client()
    return config


def _require_prometheus_client() -> None:
    """--textfile-dir writes with Prometheus' own client: refuse now (exit 3) where it is missing, not at the end."""
    import importlib.util

    if importlib.util.find_spec("prometheus_client") is None:
        from ..errors import EnvironmentUnsupported

        raise EnvironmentUnsupported("prometheus-client-missing", "--textfile-dir needs prometheus_client, which is "
                                     "not installed", hint="pip install prometheus_client (or install ddplab with pip, "
                                                           "which does)")


def main(args, console) -> int:
    from rich.console import Console

    from ..check import runner
    from ..check.formats import junit, nagios, npd, prometheus, text
    from ..report.terminal import stopped_exit_code
    from ..basics.files import write_json

    config = config_from_args(args)
    progress = console if args.format == "text" else Console(file=sys.stderr, highlight=False, width=160)
    report = runner.run(config, progress, expectations_of(config))
    record = report.results
    doc = report.to_json()
    for path in (args.json, args.write_baseline):  # every file first: a status is printed once all are stored
        if path:
            write_json(doc, path)
    if args.textfile_dir:
        prometheus.write(record, args.textfile_dir)
    if args.junit:
        junit.write(record, args.junit, hostname=getattr(report.platform, "hostname", "") or socket.gethostname())
    if args.format in formats.RUNNER_FORMATS:
        print((nagios if args.format == "nagios" else npd).render(record))
    elif args.format == "json":
        print(json.dumps(doc, indent=2))
    else:
        text.render(record, console)
    code = formats.exit_code(record.status, args.format)
    # ddplab's own formats say a stop signal to this command as every command does (130); a runner's, UNKNOWN
    return stopped_exit_code(code) if args.format not in formats.RUNNER_FORMATS else code


def runner_error(argv: list[str], exit_code: int, message: str) -> int | None:
    """cli.py's hook for a check that ended without judging the node: the textfile and the JUnit asked for say UNKNOWN
    and why (replacing an older answer a collector would keep reading), and a runner's format (`--format nagios|npd`)
    gets its UNKNOWN line and exit code. None: ddplab's own exit code."""
    message = message.removeprefix("error: ")
    _write_not_judged(argv, message, exit_code)
    fmt = option_value(argv, "--format")
    if fmt not in formats.RUNNER_FORMATS:
        return None
    from ..check.formats import nagios, npd

    print((nagios if fmt == "nagios" else npd).unknown(message))
    sys.stdout.flush()
    return formats.UNKNOWN_EXIT[fmt]  # bad usage, cannot run here, a bug, a stop: no verdict on the node


def _write_not_judged(argv: list[str], message: str, exit_code: int) -> None:
    from ..errors import ExitCode

    textfile_dir, junit_path = option_value(argv, "--textfile-dir"), option_value(argv, "--junit")
    if not textfile_dir and not junit_path:
        return
    from ..check.formats import junit, prometheus
    from ..check.judge import not_judged

    next_step = {ExitCode.USAGE: "fix the command line or the file it names",
                 ExitCode.ENVIRONMENT: "see the message: this machine cannot run the check",
                 ExitCode.INTERRUPTED: "run the check again"}.get(exit_code, "report the error with its traceback")
    record = not_judged(message, next_step)
    for path, write in ((textfile_dir, lambda p: prometheus.write(record, p)),
                        (junit_path, lambda p: junit.write(record, p, hostname=socket.gethostname()))):
        if not path:
            continue
        try:
            write(path)
        except Exception as exc:  # noqa: BLE001 - the error being said matters more than this file
            print(f"ddplab: could not write the UNKNOWN result to {path}: {type(exc).__name__}: {exc}",
                  file=sys.stderr)


def option_value(argv: list[str], flag: str) -> str | None:
    """An option's value from a command line argparse may have refused (the last one given wins, as in argparse);
    argparse's unambiguous prefixes (--textfile for --textfile-dir) are not followed."""
    found = None
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.startswith(f"{flag}="):
            found = arg.split("=", 1)[1]
    return found
