"""From `ddplab launch`'s request (torchrun's options as torchrun's own parser read them) to what torch's elastic
launcher runs, checked, with torchrun's own meaning: --standalone becomes a c10d rendezvous on a free loopback
port; torch's ``config_from_args`` builds the launch configuration, its OMP_NUM_THREADS handed to the ranks
instead of this process. Whether the job is this machine alone, and so listens on loopback only, is decided here
too. Bad values are refused (exit 2, or 3) before anything starts.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import logging
import os
import shutil
import sys
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace

from ..basics.files import check_output_dir
from ..basics.redaction import redact, redact_argv, redact_text
from ..cluster.exposure import LOOPBACK_HOST
from ..basics.validators import MAX_NODES, MAX_NPROC, check_nproc, check_path_text, is_digits
from .config import LAUNCH_USAGE, Target, UserJobConfig
from ..errors import EnvironmentUnsupported, UsageError

STANDALONE_ENDPOINT = "127.0.0.1:0"  # torchrun uses localhost:0; a single machine stays on loopback
DEFAULT_MASTER_PORT = 29500  # torchrun's, for a static rendezvous
DEFAULT_C10D_PORT = 29400  # torch's c10d rendezvous, for an endpoint named without a port
# torch's rendezvous backends whose store the launcher of this machine hosts itself (on every interface): on
# one machine, ddplab's loopback rendezvous takes their place. Others (etcd, ...) meet elsewhere: the user's.
STORE_HOSTING_BACKENDS = ("c10d", "static")
# The backends torchrun names in its help and accepts whatever the registry of the installed torch holds.
TORCHRUN_BACKENDS = ("c10d", "static", "etcd", "etcd-v2")


@dataclass(frozen=True)
class LaunchRequest:
    """A job ready to start: elastic's configuration, the interpreter, the program, and ddplab's options."""

    config: object  # torch.distributed.launcher.api.LaunchConfig
    python: str  # the interpreter each rank runs (torchrun's PYTHON_EXEC or this one)
    target: Target
    hang_timeout_s: float | None  # None: no hang detection
    out: str | None
    ras: bool = False  # on a declared hang, ask the collective library's RAS service too
    stragglers: bool = True  # watch for a rank that makes the others wait (supervision/straggler_watch.py)
    worker_env: dict[str, str] = field(default_factory=dict)  # what torchrun would have set in os.environ
    torchrun: dict = field(default_factory=dict)  # torchrun's options as the job runs with them

    @property
    def nproc_per_node(self) -> int:
        return int(self.config.nproc_per_node)

    @property
    def single_node(self) -> bool:
        return self.config.max_nodes == 1

    @property
    def rendezvous_theirs(self) -> str | None:
        """Why the job's rendezvous is the user's to expose, or None: this machine alone, its store on loopback."""
        return why_rendezvous_is_theirs(self.config)

    @property
    def loopback_endpoint(self) -> str:
        """Where a one-machine job's store listens: 127.0.0.1, on the port the user's rendezvous named."""
        return f"{LOOPBACK_HOST}:{_endpoint(self.config)[1]}"

    def launch_config(self) -> UserJobConfig:
        """The request as the report shows it, with secrets withheld from the program's arguments and torchrun's
        options (a rendezvous endpoint's ``user:password@``); the job itself runs with ``target`` as typed."""
        target = replace(self.target, args=tuple(redact_argv(self.target.args)))
        torchrun = {name: redact_text(value) if isinstance(value, str) else value
                    for name, value in self.torchrun.items()}
        worker_env = {name: redact(name, value) for name, value in self.worker_env.items()}
        return UserJobConfig(target=target, hang_timeout_s=self.hang_timeout_s, out=self.out, ras=self.ras,
                             stragglers=self.stragglers, torchrun=torchrun, worker_env=worker_env)


def resolve(config: UserJobConfig) -> LaunchRequest:
    """The request, or UsageError (exit 2) / EnvironmentUnsupported (exit 3) before anything starts."""
    check_target(config.target)
    if config.torchrun.get("log_dir") is not None:  # elastic creates it only once the ranks start: refused now
        check_output_dir(check_path_text(config.torchrun["log_dir"], "--log-dir"), "--log-dir")
    options = standalone(dict(config.torchrun))
    check_rendezvous_backend(options["rdzv_backend"])
    elastic, worker_env = elastic_config(options, config.target)
    why_rendezvous_is_theirs(elastic)  # an endpoint that cannot be read is refused now, before anything starts
    return LaunchRequest(config=elastic, python=os.getenv("PYTHON_EXEC") or sys.executable, target=config.target,
                         hang_timeout_s=config.hang_timeout_s, out=config.out, ras=config.ras,
                         stragglers=config.stragglers, worker_env=worker_env, torchrun=options)


def check_target(target: Target) -> None:
    """The program exists where torchrun would look for it."""
    if target.kind == "module":
        if _find_module(target.name) is None:
            raise UsageError("module-not-found", f"-m {target.name}: no module of that name can be imported from "
                                                 f"{os.getcwd()}")
    elif target.kind == "command":
        if shutil.which(target.name) is None:
            raise UsageError("command-not-found", f"--no-python {target.name}: no such command on PATH or path")
    elif not Path(target.name).exists():
        raise UsageError("script-not-found", f"script {target.name!r} does not exist (working directory "
                                             f"{os.getcwd()})", hint=f"usage: {LAUNCH_USAGE}")


def _find_module(name: str):
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def standalone(options: dict) -> dict:
    """torchrun's run(): --standalone (or a one-machine static rendezvous) becomes c10d on a free local port."""
    from torch.distributed.run import parse_min_max_nnodes

    one_machine_static = (options["rdzv_backend"] == "static" and not options["rdzv_endpoint"]
                          and options["master_port"] is None
                          and _nodes(options["nnodes"], parse_min_max_nnodes)[1] == 1)
    if options["standalone"] or one_machine_static:
        options.update(rdzv_backend="c10d", rdzv_endpoint=STANDALONE_ENDPOINT, rdzv_id=str(uuid.uuid4()))
    if options["master_port"] is None:
        options["master_port"] = DEFAULT_MASTER_PORT
    return options


def check_rendezvous_backend(backend: str) -> None:
    """A rendezvous backend torch's registry knows (plug-ins included) or torchrun names, not ddplab's own; torch
    itself finds out only once the agent runs."""
    from torch.distributed.elastic.rendezvous import rendezvous_handler_registry

    from ..cluster.rendezvous import OWN_BACKENDS

    registered = getattr(rendezvous_handler_registry, "_registry", {})  # no public listing in torch
    known = sorted((set(registered) - set(OWN_BACKENDS)) | set(TORCHRUN_BACKENDS))
    if backend not in known:
        raise UsageError("invalid-rdzv-backend", f"--rdzv-backend {backend}: valid backends are "
                                                 f"{', '.join(known)}")


def why_rendezvous_is_theirs(config) -> str | None:
    """None when the job is this machine alone (one node, torch's c10d or static rendezvous, a loopback endpoint);
    otherwise why it is reached over the network as the user arranged, in words."""
    endpoint = config.rdzv_endpoint or "(none)"
    if config.max_nodes > 1:
        return (f"a job across machines (--nnodes up to {config.max_nodes}) is reached over the network: torch's "
                f"{config.rdzv_backend} rendezvous at {endpoint} and the collectives' sockets are where torch and "
                "your environment put them")
    if config.rdzv_backend not in STORE_HOSTING_BACKENDS:
        return (f"you chose the {config.rdzv_backend} rendezvous at {endpoint}: it meets where you placed it, and "
                "the ranks' store and collective sockets are where torch and your environment put them")
    host, _ = _endpoint(config)
    if not _is_loopback(host):
        return (f"you named the rendezvous endpoint {endpoint}, an address other machines can reach: torch's "
                f"{config.rdzv_backend} store listens there on every interface, and the collectives' sockets "
                "are where torch and your environment put them")
    return None


def _endpoint(config) -> tuple[str, int]:
    from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint

    port = (config.rdzv_endpoint or "").rpartition(":")[2] if ":" in (config.rdzv_endpoint or "") else "0"
    try:
        if not (is_digits(port) and len(port) <= 5):  # torch's int() reads "٢٩٤٠٠" as 29400
            raise ValueError(f"the port {port!r} is not a whole number written with the digits 0-9")
        return parse_rendezvous_endpoint(config.rdzv_endpoint, default_port=DEFAULT_C10D_PORT)
    except ValueError as exc:
        why = str(exc).rstrip(".")  # torch's own words, ended by a full stop
        raise UsageError("invalid-rdzv-endpoint", f"--rdzv-endpoint {config.rdzv_endpoint}: {why}; valid forms are "
                                                  "HOST or HOST:PORT") from None


def _is_loopback(host: str) -> bool:
    """A loopback address or the name every machine gives its own (torch's default host is "localhost")."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: reachable by whoever resolves it
        return False


def _nodes(nnodes: str, parse) -> tuple[int, int]:
    """torch's reading of --nnodes, in the digits 0-9 and up to MAX_NODES machines (torch's int() reads "٢")."""
    refused = UsageError("invalid-nnodes", f"--nnodes {nnodes!r}: valid forms are N or MIN:MAX (whole numbers "
                                           f"written with the digits 0-9, 0 < MIN <= MAX <= {MAX_NODES})")
    if not all(is_digits(part.strip(" ")) for part in str(nnodes).split(":")):
        raise refused
    try:
        low, high = parse(nnodes)
    except (RuntimeError, ValueError):
        raise refused from None
    if high > MAX_NODES:
        raise refused
    return low, high


def elastic_config(options: dict, target: Target):
    """torch's config_from_args; the OMP_NUM_THREADS it would set goes to the ranks' environment, not ours."""
    from torch.distributed.run import config_from_args, parse_min_max_nnodes

    _nodes(options["nnodes"], parse_min_max_nnodes)
    args = SimpleNamespace(**options, training_script=target.name, training_script_args=list(target.args))
    omp_before = os.environ.get("OMP_NUM_THREADS")
    run_logger = logging.getLogger("torch.distributed.run")
    level = run_logger.level
    run_logger.setLevel(logging.ERROR)  # its OMP_NUM_THREADS banner: ddplab reports the value
    try:
        config, _, _ = config_from_args(args)
    except AssertionError as exc:  # torch checks user input with assert-style errors here
        raise UsageError("invalid-launch-arguments", str(exc)) from None
    except ValueError as exc:
        nproc = options["nproc_per_node"]
        if "not available" in str(exc):
            raise EnvironmentUnsupported("device-unavailable", f"--nproc-per-node {nproc}: {exc}") from None
        if "nproc_per_node" in str(exc):  # commands/launch.py names torchrun's words before this
            raise UsageError("invalid-nproc-per-node", f"--nproc-per-node {nproc}: {exc}") from None
        raise UsageError("invalid-launch-arguments", str(exc)) from None
    finally:
        run_logger.setLevel(level)
        worker_env = {}
        if os.environ.get("OMP_NUM_THREADS") != omp_before:
            worker_env["OMP_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"]
            os.environ.pop("OMP_NUM_THREADS")
    _check_counted_nproc(options["nproc_per_node"], config.nproc_per_node)
    return config, worker_env


def _check_counted_nproc(asked: str, counted: int) -> None:
    """The processes torch counted for a word (cpu, gpu, auto) in --nproc-per-node, under every command's rule."""
    try:
        check_nproc(counted, "--nproc-per-node")
    except UsageError as exc:
        raise UsageError(exc.reference, f"--nproc-per-node {asked} counts {counted} processes on this machine; "
                                        f"valid: 1 to {MAX_NPROC} ranks per node") from None
