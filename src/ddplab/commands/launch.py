"""Run your own training script as torchrun would, and supervise it: when a rank fails or the job
hangs, name the rank that holds the others up and the collective, save every rank's stacks and flight record,
and leave nothing running. Every torchrun option works; ddplab's own options come before the script, as
torchrun's do.

    ddplab launch --nproc-per-node 2 --hang-timeout 60 -- train.py --lr 0.1

Each rank starts through ddplab's boot module (parent-death guard, heartbeat, flight recorder). On a failure or a hang
ddplab collects every rank's stack and flight record, names the culprit and writes <job dir>/report.json and .html.

ddplab's options are added to ``torch.distributed.run.get_args_parser()``'s parser as their own group and taken out
of the namespace before torchrun's are kept; like torchrun's they come before the script, and a test checks the
installed torch for a name clash. Everything else means what it means to torchrun (job/torchrun_args.py).
"""

from __future__ import annotations

import argparse
import sys

from ..basics import cli_options
from .help import HelpFormatter, description, help_epilog
from ..errors import ExitCode, UsageError, printable
from ..job import run as job
from ..job.config import LAUNCH_USAGE, Target, UserJobConfig
from ..records import Report
from ..basics.validators import is_whole_number, read_number

SUMMARY = job.SUMMARY
EXAMPLES = (  # shown by --help (commands.help_epilog)
    ("ddplab launch --nproc-per-node 2 -- train.py --lr 0.1", "two ranks of your script, supervised"),
    ("ddplab launch --nproc-per-node 8 --hang-timeout 300 --out job1 -- train.py",
     "a hang declared after 300 s without progress; the report in job1/"),
)
DDPLAB_OPTIONS = tuple(cli_options.options_of(UserJobConfig))  # --hang-timeout, --out, --ras, --no-stragglers
PREFIX = "ddplab_"  # where ddplab's options land in torchrun's namespace, apart from torchrun's own
# Set by the script's position, not kept as torchrun options.
SCRIPT_DESTS = ("training_script", "training_script_args")

# Every word after `launch` is torchrun's (or the script's): no option of ddplab's own parser
# may claim one, so the subparser treats them all as positional and torchrun's parser reads them.
PARSER_OPTIONS = {"add_help": False, "prefix_chars": "\0"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("launch_argv", nargs=argparse.REMAINDER, metavar="[torchrun options] -- script.py [args]")


def build_parser() -> argparse.ArgumentParser:
    """torchrun's parser, ddplab's options in a group of their own, errors as UsageError."""
    from torch.distributed.run import get_args_parser

    parser = get_args_parser()
    _read_numbers_with_ascii_digits(parser)
    parser.prog = "ddplab launch"
    parser.usage = LAUNCH_USAGE
    this = sys.modules[__name__]  # its --help is made as every command's (commands/__init__.py)
    parser.description, parser.epilog = description(this), help_epilog(this)
    parser.formatter_class = HelpFormatter
    group = parser.add_argument_group("ddplab options (before the script, like torchrun's)")
    cli_options.add_arguments(group, UserJobConfig, prefix=PREFIX)
    ras = next(a for a in group._group_actions if a.dest == f"{PREFIX}ras")
    ras.help = ras.help.replace("RAS service", f"RAS service ({_ras_services()})", 1)  # the table's, named

    def error(message: str):
        raise UsageError("invalid-launch-arguments", message, hint=f"usage: {LAUNCH_USAGE}")

    parser.error = error
    return parser


def _read_numbers_with_ascii_digits(parser: argparse.ArgumentParser) -> None:
    """torchrun's whole-number and decimal options read as every ddplab option is (validators.read_number): its
    parser's int and float take "٢" as 2 and "1_0" as 10. Refused as torchrun's parser refuses a bad value."""
    for action in parser._actions:
        if action.type in (int, float) and action.option_strings:
            action.type = _number_type(action.option_strings[0], integer=action.type is int)


def _number_type(flag: str, integer: bool):
    def number(text: str):
        try:
            return read_number(text, flag, integer=integer)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(exc.message) from None

    number.__name__ = "int" if integer else "float"
    return number


def _ras_services() -> str:
    """The services --ras can ask, from the vendor table: name, first release, where it listens."""
    from ..platform import VENDORS

    return "; ".join(f"{v.ras.name} from {'.'.join(map(str, v.ras.since))}, at ${v.ras.address_env} or "
                     f"{v.ras.default_address}" for v in VENDORS.values() if v.ras)


def parse(argv: list[str]) -> UserJobConfig:
    """The request as typed (UsageError, exit 2, for what torchrun's parser or ddplab refuses); whether it can
    run here is checked when it is launched (job/torchrun_args.py), still before anything starts."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.module and args.no_python:
        raise UsageError("invalid-launch-arguments", "-m and --no-python together: -m runs a module with "
                                                     "python, --no-python runs a command without it")
    check_nproc_word(args.nproc_per_node, parser)
    kind = "module" if args.module else "command" if args.no_python else "script"
    torchrun = {k: v for k, v in sorted(vars(args).items()) if k not in SCRIPT_DESTS and not k.startswith(PREFIX)}
    return UserJobConfig(target=Target(kind, args.training_script, tuple(args.training_script_args)),
                         torchrun=torchrun, **cli_options.values_given(UserJobConfig, args, prefix=PREFIX))


def check_nproc_word(value: str, parser: argparse.ArgumentParser) -> None:
    """--nproc-per-node is a whole number or one of the words torchrun's own help lists (they vary by release),
    or the name a vendor's plug-in gave its device (torch accepts it too, though its help does not say)."""
    import torch

    words = _nproc_words(parser)
    if is_whole_number(value) or value in words or value == torch._C._get_privateuse1_backend_name():
        return
    raise UsageError("invalid-nproc-per-node", f"--nproc-per-node {value}: valid values are a whole number or one "
                                               f"of torchrun's: {', '.join(words)}")


def _nproc_words(parser: argparse.ArgumentParser) -> list[str]:
    text = next((a.help or "" for a in parser._actions if "--nproc-per-node" in a.option_strings), "")
    inner = text[text.find("[") + 1:text.rfind("]")] if "[" in text else ""
    return [w.strip() for w in inner.split(",") if w.strip() and w.strip() != "int"]


def validate(args) -> None:
    args.config = parse(args.launch_argv)


def main(args, console) -> int:
    from ..records import make_report
    from ..job.session import Observer

    record = job.run(args.config, Observer(console))
    report = make_report(job, args.config, record)
    job.write_reports(report)
    render(report, console)
    if report.results.outcome == "interrupted":  # Ctrl+C or SIGTERM to ddplab, as `ddplab run` says it
        return ExitCode.INTERRUPTED
    return report.verdict.exit_code


def render(report: Report, console) -> None:
    r = report.results
    # markup off: sizes look like markup; printable: a rank's own words may hold terminal escapes
    say = lambda text: console.print(printable(text), markup=False, highlight=False)  # noqa: E731
    say(f"ddplab launch: {r.outcome.upper()} in {r.duration_s:.1f} s")
    if r.launcher_error:  # why the launcher itself failed (a port taken, a rendezvous that never met)
        say(f"  launcher error: {r.launcher_error}")
    culprit = r.culprit
    if culprit:
        say(f"  culprit: {culprit.reason}")
        for line in culprit.evidence:
            say(f"    {line}")
        blame = "no rank" if r.torchrun_root_cause_rank is None else f"rank {r.torchrun_root_cause_rank}"
        say(f"  torchrun would blame {blame}; flight-recorder analysis by "
            f"{'torch' if culprit.analyzer.status == 'used' else 'ddplab'} "
            f"(torch's analyzer: {culprit.analyzer.status})")
    for rank in r.ranks:
        if rank.error:
            say(f"  rank {rank.rank} raised {rank.error.type}: {rank.error.message[:200]}")
    ras = r.hang.ras if r.hang else None
    if ras:
        say(f"  {ras.service or 'RAS'}: {ras.status}" + (f" ({ras.why})" if ras.why else "")
            + (f", {len(ras.answer)} characters kept in the report" if ras.answer else ""))
    if r.stacks:
        say(f"  stacks: {', '.join(r.stacks.values())}")
    if r.hang and r.hang.py_spy:
        say(f"  stacks of the ranks that did not answer: {r.hang.py_spy}")
    outside = [rank.py_spy_stacks for rank in r.ranks if rank.py_spy_stacks]
    if outside:
        say(f"  py-spy's stacks: {', '.join(outside)}")
    if r.stragglers:
        say(f"  {r.stragglers.summary()}")
    if r.listen:
        say(f"  listened: {r.listen.summary}")
    say(f"  left running: {len(r.left_running)} process(es); report: {r.job_dir}/report.json, report.html")
