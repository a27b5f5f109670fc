"""Command line: parse, validate, call one command, map errors to exit codes (errors.ExitCode).

A command that speaks a health-check runner's language (`ddplab check --format nagios|npd`) says its errors in that
language too, with that runner's exit code (its ``runner_error`` hook). A reader that leaves early (`| head -1`)
changes nothing: the rest of standard output goes to /dev/null and the command ends as it would have. `--format
json` (or `--json -`) puts the JSON report alone on standard output, and what the command shows on standard error.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

from . import __version__, commands
from .basics import interrupts, numpy_warning, redaction
from .basics.cli_options import sentence
from .commands import help as command_help
from .errors import DdplabError, ExitCode, invalid_choice, printable
from .basics.files import STDOUT, check_output_file


class ArgumentsRefused(SystemExit):
    """argparse refused the command line (exit 2); ``message`` says why, for a runner's format."""

    def __init__(self, message: str):
        super().__init__(ExitCode.USAGE)
        self.message = message


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own errors: same shape and exit code as ours
        self.print_usage(sys.stderr)
        sys.stderr.write(f"error: invalid-usage\n  {self.prog}: {printable(message)}\n")
        raise ArgumentsRefused(f"invalid-usage: {self.prog}: {printable(message)}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser; ``only``: that command's alone. A command line that names its command needs no other
    (the others' modules are not imported: `ddplab report` loads no measurement to build their options)."""
    parser = _Parser(prog="ddplab", description="Prove a distributed-training communication stack on one machine.",
                     epilog=command_help.help_epilog(), formatter_class=command_help.HelpFormatter)
    parser.add_argument("--version", action="version", version=f"ddplab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in [only] if only else commands.COMMANDS:
        module = commands.load(name)
        p = sub.add_parser(name, help=sentence(module.SUMMARY), description=command_help.description(module),
                           epilog=command_help.help_epilog(module), formatter_class=command_help.HelpFormatter,
                           **getattr(module, "PARSER_OPTIONS", {}))
        module.add_arguments(p)
    return parser


@interrupts.owned  # from the first line: Ctrl+C, SIGTERM and SIGHUP become an orderly stop (basics/interrupts.py)
def main(argv: list[str] | None = None) -> int:
    with stdout_reader_may_leave():
        exit_code = _main(sys.argv[1:] if argv is None else argv)
        _leave_now_if_torch_still_waits(exit_code)
    if argv is None:  # the program itself, not a caller in the same process
        _skip_the_collection_at_exit()
    return exit_code


def _skip_the_collection_at_exit() -> None:
    """The interpreter's shutdown collects every object it tracks, several times: with torch imported that took
    about 0.25 s of each command's exit (0.36 s against 0.12 s for `import torch` alone). Everything the command
    writes is closed by now and atexit's handlers still run; frozen objects are only left out of those
    collections."""
    gc.freeze()


def _leave_now_if_torch_still_waits(exit_code: int) -> None:
    """A stop while elastic waited for other machines leaves that wait running in torch's C++, which aborts the
    process if it comes back while the interpreter shuts down (supervision/machine_waits.py): everything is written,
    so leave without the shutdown. Only a process that launched imported that module, and a command that reads
    reports must not import it."""
    machine_waits = sys.modules.get("ddplab.supervision.machine_waits")
    if machine_waits is not None and machine_waits.left_waiting_in_torch():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(exit_code))


def _main(argv: list[str]) -> int:
    redaction.learn(argv, os.environ)  # withheld wherever they appear again: files, reports, the terminal's record
    if argv and not argv[0].startswith("-") and argv[0] not in commands.COMMANDS:
        print(invalid_choice("command", argv[0], commands.COMMANDS).render(), file=sys.stderr)
        return ExitCode.USAGE
    parser = build_parser(argv[0] if argv and argv[0] in commands.COMMANDS else None)
    try:
        args = parser.parse_args(argv)
    except ArgumentsRefused as refused:
        spoken = in_runner_format(argv, ExitCode.USAGE, refused.message)
        if spoken is None:
            raise
        return spoken
    if not args.command:
        parser.print_help()
        return ExitCode.USAGE
    # Before any command imports torch: its warning that numpy is missing is no finding for ddplab (numpy_warning.py).
    numpy_warning.ignore_in_this_process()

    from .commands import options
    from .report.terminal import make_console

    json_path = getattr(args, "json", None)
    # `--format json` or `--json -`: standard output is the JSON's alone, and what the command shows goes to stderr
    console = make_console(stderr=options.json_on_stdout(args))
    module = commands.load(args.command)
    try:
        options.check_output_options(args, getattr(module, "OUTPUT_FORMATS", options.OUTPUT_FORMATS))
        if args.command not in commands.WITHOUT_TORCH:  # a torch older than the floor: one sentence, exit 3
            from .basics.torch_floor import require_supported

            require_supported()
        module.validate(args)
        if json_path and json_path != STDOUT:  # written at the end: refuse now what could not be written then
            check_output_file(json_path, "--json")
        return int(module.main(args, console))
    except DdplabError as exc:
        print(exc.render(), file=sys.stderr)
        return _exit(argv, exc.exit_code, f"{exc.reference}: {exc.message}")
    except KeyboardInterrupt:
        print("interrupted by user", file=sys.stderr)
        return _exit(argv, ExitCode.INTERRUPTED, "interrupted by user")
    except Exception as exc:  # a bug: one line here, the whole traceback in a file
        line = internal_error_line(args, exc, write_traceback(args))
        print(line, file=sys.stderr)
        return _exit(argv, ExitCode.INTERNAL, line)


class _ReaderMayLeave:
    """Standard output whose reader may close its end: the first write or flush that meets the closed pipe points
    the descriptor at /dev/null, so that the command goes on and the interpreter's last flush does not fail (as
    pip and the Python documentation do on EPIPE). Everything else is the stream's own."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._to_devnull()
            return len(text)

    def flush(self):
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._to_devnull()

    def _to_devnull(self):
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)
        with contextlib.suppress(BrokenPipeError):
            self._stream.flush()  # what was still buffered goes to /dev/null too

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def stdout_reader_may_leave():
    """sys.stdout is a _ReaderMayLeave inside the block, and is flushed at its end, where a closed pipe is still
    this block's to absorb."""
    real = sys.stdout
    if real is None:
        yield
        return
    guarded = _ReaderMayLeave(real)
    sys.stdout = guarded
    try:
        yield
    finally:
        guarded.flush()
        sys.stdout = real


def in_runner_format(argv: list[str], exit_code: int, message: str) -> int | None:
    """A command that speaks a health-check runner's language (`check --format nagios`) says an error in it too:
    its ``runner_error`` hook prints the runner's line and gives the runner's exit code. None: ddplab's own."""
    if not argv or argv[0] not in commands.COMMANDS:
        return None
    hook = getattr(commands.load(argv[0]), "runner_error", None)
    return hook(argv[1:], int(exit_code), message) if hook is not None else None


def _exit(argv: list[str], exit_code: int, message: str) -> int:
    spoken = in_runner_format(argv, exit_code, message)
    return int(exit_code) if spoken is None else spoken


def internal_error_line(args, exc: BaseException, traceback_path: Path | None) -> str:
    """What broke and where, in one line, and where the full traceback is."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    what = printable((str(exc).strip().splitlines() or [""])[0][:200])
    saved = f"full traceback: {traceback_path}" if traceback_path else "the traceback could not be written"
    return (f"error: internal-error: ddplab {args.command} broke ({type(exc).__name__}: {what}{where}); "
            f"{saved}")


def write_traceback(args) -> Path | None:
    """The traceback, in the command's run directory when it has one, else in a temp file."""
    text = redaction.redact_text(traceback.format_exc())
    name = f"ddplab-traceback-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
    for folder in (getattr(args, "run_dir", None), getattr(args, "out", None) if args.command == "run" else None):
        if folder and Path(folder).is_dir():
            try:
                path = Path(folder) / name
                path.write_text(text)
                return path.resolve()
            except OSError:
                break
    try:
        fd, path = tempfile.mkstemp(prefix="ddplab-traceback-", suffix=".txt")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        return Path(path)
    except OSError:
        print(text, file=sys.stderr)  # nowhere to write it: better on the screen than lost
        return None
