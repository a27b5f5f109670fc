"""`ddplab launch`'s command line: torchrun's, parsed by torchrun's own parser, plus ddplab's.

    ddplab launch [torchrun options] [--hang-timeout S] [--out DIR] [--] script.py [args]
    ddplab launch [torchrun options] [ddplab options] -m module [args]
    ddplab launch [torchrun options] [ddplab options] --no-python command [args]

How ddplab's options are kept apart from torchrun's: they are added to the parser that
``torch.distributed.run.get_args_parser()`` builds, as their own argument group, and taken
out of the namespace before torch's ``config_from_args`` sees it. Like torchrun's options
they must come before the script: everything from the script on belongs to the script
(``--`` may mark the spot). Their names must never be torchrun's: a test checks the
installed torch for a clash. Everything else (nnodes, rendezvous, --standalone, -m,
--no-python, log options, PET_* environment defaults) means what it means to torchrun.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import EnvironmentUnsupported, UsageError
from .boot import Target

DEFAULT_HANG_TIMEOUT_S = 600.0  # as long as torch's own default collective timeout (10 minutes)
STANDALONE_ENDPOINT = "127.0.0.1:0"  # torchrun uses localhost:0; a single machine stays on loopback
USAGE = "ddplab launch [torchrun options] [--hang-timeout S] [--out DIR] [--] script.py [args]"
DDPLAB_OPTIONS = ("--hang-timeout", "--out")


@dataclass(frozen=True)
class LaunchRequest:
    config: object  # torch.distributed.launcher.api.LaunchConfig
    python: str  # the interpreter each rank runs (torchrun's PYTHON_EXEC or this one)
    target: Target
    hang_timeout_s: float | None  # None: no hang detection
    out: str | None
    worker_env: dict[str, str] = field(default_factory=dict)  # what torchrun would have set in os.environ
    torchrun: dict = field(default_factory=dict)  # torchrun's options as parsed, for the report

    @property
    def nproc_per_node(self) -> int:
        return int(self.config.nproc_per_node)

    @property
    def single_node(self) -> bool:
        return self.config.max_nodes == 1


def build_parser():
    """torchrun's parser, ddplab's options in a group of their own, errors as UsageError."""
    from torch.distributed.run import get_args_parser

    parser = get_args_parser()
    parser.prog = "ddplab launch"
    parser.usage = USAGE
    parser.description = ("Run a training script as torchrun would, and supervise it: name the rank that "
                          "holds the others up, save every rank's stack and flight record, leave nothing running.")
    group = parser.add_argument_group("ddplab options (before the script, like torchrun's)")
    group.add_argument("--hang-timeout", type=float, default=DEFAULT_HANG_TIMEOUT_S, dest="ddplab_hang_timeout",
                       metavar="S", help="declare a hang when a rank waits and no rank has made progress for S "
                                         "seconds; 0 turns it off (default: %(default)s)")
    group.add_argument("--out", default=None, dest="ddplab_out", metavar="DIR",
                       help="job directory: report.json, stacks, flight records (default: ./ddplab-runs/ID)")

    def error(message: str):
        raise UsageError("invalid-launch-arguments", message, hint=f"usage: {USAGE}")

    parser.error = error
    return parser


def parse(argv: list[str]) -> LaunchRequest:
    """The request, or UsageError (exit 2) / EnvironmentUnsupported (exit 3) before anything starts."""
    args = build_parser().parse_args(argv)
    hang_timeout_s, out = args.ddplab_hang_timeout, args.ddplab_out
    del args.ddplab_hang_timeout, args.ddplab_out
    if hang_timeout_s < 0:
        raise UsageError("invalid-hang-timeout", f"--hang-timeout {hang_timeout_s:g}: must be 0 (off) or a "
                                                 "positive number of seconds")
    if args.run_path:
        raise UsageError("unsupported-option", "--run-path runs the script inside torchrun's own worker function; "
                                               "ddplab runs each rank as its own python process",
                         hint="drop --run-path: the script runs as `python script.py` in every rank")
    target = _target(args)
    _standalone(args)
    config, worker_env = _config(args)
    return LaunchRequest(config=config, python=os.getenv("PYTHON_EXEC") or sys.executable, target=target,
                         hang_timeout_s=hang_timeout_s or None, out=out, worker_env=worker_env,
                         torchrun=_torchrun_options(args))


def _target(args) -> Target:
    script, rest = args.training_script, tuple(args.training_script_args)
    if args.module and args.no_python:
        raise UsageError("invalid-launch-arguments", "-m and --no-python together: -m runs a module with "
                                                     "python, --no-python runs a command without it")
    if args.module:
        if _find_module(script) is None:
            raise UsageError("module-not-found", f"-m {script}: no module of that name can be imported from "
                                                 f"{os.getcwd()}")
        return Target("module", script, rest)
    if args.no_python:
        if shutil.which(script) is None:
            raise UsageError("command-not-found", f"--no-python {script}: no such command on PATH or path")
        return Target("command", script, rest)
    if not Path(script).exists():
        raise UsageError("script-not-found", f"script {script!r} does not exist (working directory {os.getcwd()})",
                         hint=f"usage: {USAGE}")
    return Target("script", script, rest)


def _find_module(name: str):
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def _standalone(args) -> None:
    """torchrun's run(): --standalone (or a one-machine static rendezvous without a master
    port) becomes a c10d rendezvous on a free port of this machine."""
    from torch.distributed.run import parse_min_max_nnodes

    if args.standalone:
        args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id = "c10d", STANDALONE_ENDPOINT, str(uuid.uuid4())
    elif args.rdzv_backend == "static" and not args.rdzv_endpoint and args.master_port is None:
        if _nodes(args.nnodes, parse_min_max_nnodes)[1] == 1:
            args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id = "c10d", STANDALONE_ENDPOINT, str(uuid.uuid4())
    if args.master_port is None:
        args.master_port = 29500


def _nodes(nnodes: str, parse) -> tuple[int, int]:
    try:
        return parse(nnodes)
    except (RuntimeError, ValueError):
        raise UsageError("invalid-nnodes", f"--nnodes {nnodes}: valid forms are N or MIN:MAX "
                                           "(whole numbers, 0 < MIN <= MAX)") from None


def _config(args):
    """torch's config_from_args, with its side effects kept out of this process: the
    OMP_NUM_THREADS it would set becomes part of the ranks' environment instead."""
    from torch.distributed.run import config_from_args, parse_min_max_nnodes

    _nodes(args.nnodes, parse_min_max_nnodes)
    omp_before = os.environ.get("OMP_NUM_THREADS")
    run_logger = logging.getLogger("torch.distributed.run")
    level = run_logger.level
    run_logger.setLevel(logging.ERROR)  # its OMP_NUM_THREADS banner: ddplab reports the value
    try:
        config, _, _ = config_from_args(args)
    except AssertionError as exc:  # torch checks user input with assert-style errors here
        raise UsageError("invalid-launch-arguments", str(exc)) from None
    except ValueError as exc:
        if "not available" in str(exc):
            raise EnvironmentUnsupported("device-unavailable", f"--nproc-per-node {args.nproc_per_node}: {exc}") \
                from None
        if "nproc_per_node" in str(exc):
            raise UsageError("invalid-nproc-per-node", f"--nproc-per-node {args.nproc_per_node}: valid values are "
                                                       f"a whole number or one of torchrun's: {_nproc_words()}") from None
        raise UsageError("invalid-launch-arguments", str(exc)) from None
    finally:
        run_logger.setLevel(level)
        worker_env = {}
        if os.environ.get("OMP_NUM_THREADS") != omp_before:
            worker_env["OMP_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"]
            os.environ.pop("OMP_NUM_THREADS")
    if config.nproc_per_node < 1:
        raise UsageError("invalid-nproc-per-node", f"--nproc-per-node {args.nproc_per_node}: at least one "
                                                   "process per node")
    return config, worker_env


def _nproc_words() -> str:
    """The words torchrun's own help lists for --nproc-per-node (they vary by torch release)."""
    from torch.distributed.run import get_args_parser

    text = next((a.help or "" for a in get_args_parser()._actions if "--nproc-per-node" in a.option_strings), "")
    return text[text.find("[") + 1:text.rfind("]")] if "[" in text else text


def _torchrun_options(args) -> dict:
    return {k: v for k, v in sorted(vars(args).items()) if k not in ("training_script", "training_script_args")}
