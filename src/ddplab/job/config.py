"""`ddplab launch`'s request: the user's program (``Target``), torchrun's options for it as torchrun's own parser
read them, and ddplab's supervision (``UserJobConfig``); and the types of torchrun's options, so that a report
read back is checked against them (records/codec.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..basics.cli_options import Range, check_fields, option, switch
from ..errors import UsageError
from ..basics.validators import (MAX_NODES, MAX_TIMEOUT_S, argv_text, check_choice, check_nproc, check_number,
                                is_whole_number, number_text)


MAX_RESTARTS = 10_000  # a restart takes seconds at least: more is a typo
DEFAULT_HANG_TIMEOUT_S = 600.0  # as long as torch's own default collective timeout (10 minutes)
LAUNCH_USAGE = ("ddplab launch [torchrun options] [--hang-timeout S] [--out DIR] [--ras] [--no-stragglers] [--] "
                "script.py [args]")
TARGET_FLAGS = {"script": [], "module": ["-m"], "command": ["--no-python"]}  # each kind's flag on a command line
TARGET_KINDS = tuple(TARGET_FLAGS)


@dataclass(frozen=True)
class Target:
    """The user's program, as torchrun's command line names it."""

    kind: str  # "script", "module" (-m) or "command" (--no-python)
    name: str
    args: tuple[str, ...] = ()

    def __post_init__(self):
        check_choice(self.kind, "target kind", TARGET_KINDS)
        object.__setattr__(self, "args", tuple(self.args))

    def boot_argv(self) -> list[str]:
        """The arguments after `python -u -m ddplab.job.boot`."""
        return [*TARGET_FLAGS[self.kind], self.name, *self.args]

    def launch_argv(self) -> list[str]:
        """The end of `ddplab launch`'s command line: the flag that names the kind, then ``--`` and the
        program, so that nothing of the program's is read as an option of ours or torchrun's."""
        return [*TARGET_FLAGS[self.kind], "--", self.name, *self.args]

    @classmethod
    def from_boot_argv(cls, argv: list[str]) -> "Target":
        if not argv or (argv[0] in ("-m", "--no-python") and len(argv) < 2):
            raise SystemExit("usage: python -m ddplab.job.boot [-m module | --no-python cmd | script.py] [args...]")
        for kind, flag in TARGET_FLAGS.items():
            if flag and argv[0] == flag[0]:
                return cls(kind, argv[1], tuple(argv[2:]))
        return cls("script", argv[0], tuple(argv[1:]))


def check_torchrun_numbers(torchrun: dict[str, Any]) -> None:
    """torchrun's numeric options that torch checks only once the job runs, or never, refused here as every other
    command refuses them (a word for --nproc-per-node is checked once torch has counted it: torchrun_args.py)."""
    nproc = torchrun.get("nproc_per_node")
    if isinstance(nproc, str) and is_whole_number(nproc):
        nproc = int(nproc)
    if isinstance(nproc, int):
        check_nproc(nproc, "--nproc-per-node")
    if torchrun.get("monitor_interval") is not None:
        check_number(torchrun["monitor_interval"], "--monitor-interval", 0, MAX_TIMEOUT_S, name="seconds",
                     low_open=True)
    for name, flag, high in (("master_port", "--master-port", 65535), ("node_rank", "--node-rank", MAX_NODES - 1),
                             ("max_restarts", "--max-restarts", MAX_RESTARTS),
                             ("shutdown_timeout", "--shutdown-timeout", MAX_TIMEOUT_S)):
        if torchrun.get(name) is not None:  # elastic took a negative port or node rank, and failed later
            check_number(torchrun[name], flag, 0, high, integer=True)


# The type of each torchrun option's value as torchrun's parser gives it, so a report read back refuses a string
# where the job ran with a number or a switch. Options a newer torch adds are any JSON value; a test checks this
# table against the installed torch's parser.
TORCHRUN_SWITCHES = ("standalone", "module", "no_python", "run_path", "virtual_local_rank")
TORCHRUN_VALUE_TYPES: dict[str, Any] = {
    **{name: bool for name in TORCHRUN_SWITCHES},
    "max_restarts": int, "node_rank": int, "master_port": int | None, "shutdown_timeout": int | None,
    "monitor_interval": float,
    "duplicate_stdout_filters": list[str], "duplicate_stderr_filters": list[str],
    **{name: str | None for name in (
        "nnodes", "nproc_per_node", "rdzv_backend", "rdzv_endpoint", "rdzv_id", "rdzv_conf", "start_method",
        "event_log_handler", "role", "log_dir", "redirects", "tee", "local_ranks_filter", "master_addr",
        "local_addr", "logs_specs", "numa_binding", "signals_to_handle")},
}

# torchrun options that the target's kind spells (Target.launch_argv), not the options list.
TARGET_OPTIONS = ("module", "no_python")


@dataclass(frozen=True, kw_only=True)
class UserJobConfig:
    """`ddplab launch`: the user's program, torchrun's options for it as its own parser reads them (in a report:
    as the job ran, the rendezvous ddplab chose included), and ddplab's supervision (the spelled fields, added to
    torchrun's parser as a group). Not torch's ``LaunchConfig``, which torchrun_args.py builds from this."""

    target: Target
    hang_timeout_s: float | None = option("--hang-timeout", default=DEFAULT_HANG_TIMEOUT_S, metavar="S", range=Range(
        0, MAX_TIMEOUT_S, name="seconds", unit=" (0 turns it off)"))
    """Declare a hang when a rank waits and no rank has made progress for S seconds; 0 turns hang detection off."""
    out: str | None = option("--out", default=None, metavar="DIR")
    """Job directory: report.json, report.html, stacks, flight records; refused when it already holds a run;
    default: ./ddplab-runs/launch-<id>."""
    ras: bool = switch("--ras", default=False)
    """On a hang, also ask the collective library's RAS service and keep its answer; off by default: such
    queries have crashed jobs on releases torch ships."""
    stragglers: bool = switch(off="--no-stragglers", default=True, json={"omit_default": True})
    """Watch for a rank that makes the others wait, from its flight recorder's times (on by default; it never ends
    the job); --no-stragglers: do not watch for stragglers (no rank reads its recorder for it)."""
    torchrun: dict[str, Any] = field(default_factory=dict, metadata={"keys": TORCHRUN_VALUE_TYPES})
    """torchrun's options by their parser's names (nproc_per_node, rdzv_backend, ...), JSON values."""
    worker_env: dict[str, str] = field(default_factory=dict, compare=False)
    """Filled in at launch, not asked for: what torch's launcher would set in its own environment for the
    ranks (OMP_NUM_THREADS for several ranks), handed to the ranks instead."""

    def __post_init__(self):
        check_fields(self)
        if self.hang_timeout_s is not None:
            object.__setattr__(self, "hang_timeout_s", float(self.hang_timeout_s) or None)  # 0 turns it off
        check_torchrun_numbers(self.torchrun)
        if self.torchrun.get("run_path"):
            raise UsageError("unsupported-option", "--run-path runs the script inside torchrun's own worker "
                                                   "function; ddplab runs each rank as its own python process",
                             hint="drop --run-path: the script runs as `python script.py` in every rank")

    def to_argv(self) -> list[str]:
        """Every torchrun option spelt out (their defaults come from PET_* variables, which differ between
        machines), then ddplab's, then the program."""
        out: list[str] = []
        for name, value in sorted(self.torchrun.items()):
            if name in TARGET_OPTIONS or value is None or value is False or value == []:
                continue
            flag = "--" + name.replace("_", "-")
            out.append(flag if value is True else f"{flag}={argv_text(value)}")
        out.append(f"--hang-timeout={number_text(self.hang_timeout_s or 0)}")
        if self.out is not None:
            out.append(f"--out={self.out}")
        if self.ras:
            out.append("--ras")
        if not self.stragglers:
            out.append("--no-stragglers")
        return out + self.target.launch_argv()
