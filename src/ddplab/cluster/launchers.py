"""What an existing launcher (torchrun, srun, mpirun) told this process, read from its environment.

Pure functions over an environment mapping, so every case is a unit test:

- ``detect(environ)`` -> ``LaunchContext``: which launcher, how many processes it started (in all
  and on this node), this process's index among them, nodes and node rank, the host that should
  serve the rendezvous (Slurm: the first node of the job's node list), and this process's role:
  ``ONE_PER_NODE`` (a launcher per node: ddplab starts the ranks itself) or ``ONE_PER_RANK``
  (every process is a rank already).
- ``mistakes(context, nnodes, nproc)``: what goes wrong if ddplab's launcher runs here with these
  options, in words. The classic one: ``srun -n 4 ddplab train`` or ``torchrun --nproc-per-node 4
  ddplab ...`` starts four launchers, each forming its own job (of world size 1 with --nproc 1)
  instead of one job of world size 4.
- ``expand_hostlist``: Slurm's compressed host lists (``node[01-03,07]``, ``r[1-2]-n[1-2]``).
- ``resolve(context, asked)``: what a ddplab command runs as here, from the launcher's context and
  the options given (commands/options.py): one launcher per node with nodes, endpoint and who hosts
  the store taken from srun/mpirun unless given; one rank of torchrun's job (``started_by``
  torchrun); or a refusal (exit 2) with ``mistakes``' words.

Which launcher wins when several left variables: the innermost one. torchrun's workers carry
TORCHELASTIC_RUN_ID; Open MPI's processes carry OMPI_COMM_WORLD_* even when its daemons were
started by srun (they inherit a Slurm step of their own); srun's tasks carry SLURM_PROCID and a
step id; MPICH/Intel MPI (Hydra) and PMIx launchers carry PMI_RANK/PMI_SIZE or PMIX_RANK. A
Slurm allocation without a step (an sbatch script, salloc's shell) runs on one node only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

ONE_PER_NODE = "one launcher per node"
ONE_PER_RANK = "one process per rank"
ROLE_UNKNOWN = "unknown"  # the launcher does not say how many processes share a node

TORCHRUN = "torchrun"
SRUN = "srun"
MPIRUN = "mpirun"
SLURM_ALLOCATION = "slurm allocation"  # inside sbatch/salloc, but not started by srun
NONE = "none"

MAX_HOSTS = 65_536  # a host list longer than this is refused rather than expanded
DEFAULT_PORT = 29400  # the rendezvous port when the launcher names only the first node: torchrun's c10d default


@dataclass(frozen=True)
class LaunchContext:
    launcher: str  # TORCHRUN, SRUN, MPIRUN, SLURM_ALLOCATION or NONE
    role: str  # ONE_PER_NODE, ONE_PER_RANK or ROLE_UNKNOWN
    processes: int | None = None  # processes the launcher started, in all
    process_index: int | None = None  # this process among them (its rank when ONE_PER_RANK)
    local_processes: int | None = None  # processes the launcher started on this node
    local_index: int | None = None
    nnodes: int | None = None
    node_rank: int | None = None
    endpoint_host: str | None = None  # where the rendezvous should be: Slurm's first node, torchrun's MASTER_ADDR
    endpoint_port: int | None = None  # known only under torchrun (MASTER_PORT)
    hosts: tuple[str, ...] = ()  # every node of the job, where the launcher says
    job_id: str | None = None
    evidence: tuple[str, ...] = ()  # the variables that said so, NAME=value
    notes: tuple[str, ...] = ()  # what could not be read or known

    @property
    def independent_launchers_per_node(self) -> int:
        """ddplab launchers this launcher starts on one node (ddplab wants exactly one)."""
        return self.local_processes or 1

    def to_dict(self) -> dict:
        return {name: (list(value) if isinstance(value, tuple) else value)
                for name, value in self.__dict__.items()}


def detect(environ: Mapping[str, str]) -> LaunchContext:
    """The innermost launcher that started this process, and what it says about the job."""
    for reader in (_torchrun, _open_mpi, _srun, _pmi, _slurm_allocation):
        context = reader(environ)
        if context is not None:
            return context
    return LaunchContext(NONE, ONE_PER_NODE)


# --- one reader per launcher -------------------------------------------------------------------


class _Reader:
    """Integers and strings out of an environment, remembering which variables were used."""

    def __init__(self, environ: Mapping[str, str]):
        self.environ = environ
        self.used: dict[str, str] = {}
        self.notes: list[str] = []

    def text(self, *names: str) -> str | None:
        for name in names:
            value = self.environ.get(name)
            if value not in (None, ""):
                self.used[name] = value
                return value
        return None

    def integer(self, *names: str) -> int | None:
        value = self.text(*names)
        if value is None:
            return None
        try:
            number = int(value)
        except ValueError:
            self.notes.append(f"{self._name_of(value, names)}={value!r} is not a whole number: ignored")
            return None
        return number if number >= 0 else None

    def _name_of(self, value: str, names: tuple[str, ...]) -> str:
        return next(n for n in names if self.used.get(n) == value)

    def evidence(self) -> tuple[str, ...]:
        return tuple(f"{k}={v}" for k, v in self.used.items())


def _torchrun(environ: Mapping[str, str]) -> LaunchContext | None:
    if "TORCHELASTIC_RUN_ID" not in environ:
        return None
    r = _Reader(environ)
    run_id = r.text("TORCHELASTIC_RUN_ID")
    return LaunchContext(
        TORCHRUN, ONE_PER_RANK, processes=r.integer("WORLD_SIZE"), process_index=r.integer("RANK"),
        local_processes=r.integer("LOCAL_WORLD_SIZE"), local_index=r.integer("LOCAL_RANK"),
        nnodes=r.integer("GROUP_WORLD_SIZE"), node_rank=r.integer("GROUP_RANK"),
        endpoint_host=r.text("MASTER_ADDR"), endpoint_port=r.integer("MASTER_PORT"), job_id=run_id,
        evidence=r.evidence(), notes=tuple(r.notes))


def _open_mpi(environ: Mapping[str, str]) -> LaunchContext | None:
    if "OMPI_COMM_WORLD_SIZE" not in environ:
        return None
    r = _Reader(environ)
    size, rank = r.integer("OMPI_COMM_WORLD_SIZE"), r.integer("OMPI_COMM_WORLD_RANK")
    local_size, local_rank = r.integer("OMPI_COMM_WORLD_LOCAL_SIZE"), r.integer("OMPI_COMM_WORLD_LOCAL_RANK")
    return _mpi_context(r, size, rank, local_size, local_rank)


def _pmi(environ: Mapping[str, str]) -> LaunchContext | None:
    if not ({"PMI_SIZE", "PMI_RANK", "PMIX_RANK"} & set(environ)):
        return None
    r = _Reader(environ)
    size, rank = r.integer("PMI_SIZE"), r.integer("PMI_RANK", "PMIX_RANK")
    # Hydra (MPICH, Intel MPI) says how many processes share this node; plain PMIx does not.
    local_size, local_rank = r.integer("MPI_LOCALNRANKS"), r.integer("MPI_LOCALRANKID")
    return _mpi_context(r, size, rank, local_size, local_rank)


def _mpi_context(r: _Reader, size, rank, local_size, local_rank) -> LaunchContext:
    nnodes = node_rank = None
    if local_size == 1:  # one process per node: the process index is the node's
        nnodes, node_rank = size, rank
    elif size is not None and local_size:
        if size % local_size == 0:
            nnodes = size // local_size
            r.notes.append(f"nodes counted as {size} processes / {local_size} per node: assumes the same number "
                           f"on every node")
    else:
        r.notes.append("the MPI launcher does not say how many processes share this node")
    # mpirun does not tell a process where rank 0 runs; inside a Slurm allocation the node list does.
    hosts, endpoint = _slurm_hosts(r, step=False)
    if endpoint is None:
        r.notes.append("mpirun does not say where rank 0 runs: give --rdzv-endpoint HOST:PORT, HOST being the first "
                       "host of your hostfile or -H list")
    return LaunchContext(MPIRUN, _role(local_size), processes=size,
                         process_index=rank, local_processes=local_size, local_index=local_rank, nnodes=nnodes,
                         node_rank=node_rank, endpoint_host=endpoint, hosts=hosts, job_id=r.text("PMIX_NAMESPACE"),
                         evidence=r.evidence(), notes=tuple(r.notes))


def _srun(environ: Mapping[str, str]) -> LaunchContext | None:
    if "SLURM_PROCID" not in environ or not ({"SLURM_STEP_ID", "SLURM_STEPID"} & set(environ)):
        return None
    r = _Reader(environ)
    # A step may use part of the allocation (srun -N1 in a 2-node job): the step's values first.
    processes = r.integer("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS")
    nnodes = r.integer("SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES")
    node_rank = r.integer("SLURM_NODEID")
    local = _tasks_on_node(r, node_rank, processes, nnodes)
    hosts, endpoint = _slurm_hosts(r, step=True)
    return LaunchContext(SRUN, _role(local), processes=processes,
                         process_index=r.integer("SLURM_PROCID"), local_processes=local,
                         local_index=r.integer("SLURM_LOCALID"), nnodes=nnodes, node_rank=node_rank,
                         endpoint_host=endpoint, hosts=hosts, job_id=r.text("SLURM_JOB_ID", "SLURM_JOBID"),
                         evidence=r.evidence(), notes=tuple(r.notes))


def _slurm_allocation(environ: Mapping[str, str]) -> LaunchContext | None:
    if not ({"SLURM_JOB_ID", "SLURM_JOBID"} & set(environ)):
        return None
    r = _Reader(environ)
    hosts, endpoint = _slurm_hosts(r, step=False)
    nnodes = r.integer("SLURM_NNODES", "SLURM_JOB_NUM_NODES")
    return LaunchContext(SLURM_ALLOCATION, ONE_PER_NODE, processes=1, process_index=0, local_processes=1,
                         local_index=0, nnodes=nnodes, node_rank=0 if nnodes == 1 else None, endpoint_host=endpoint,
                         hosts=hosts, job_id=r.text("SLURM_JOB_ID", "SLURM_JOBID"), evidence=r.evidence(),
                         notes=tuple(r.notes))


def _role(local_processes: int | None) -> str:
    if local_processes is None:
        return ROLE_UNKNOWN
    return ONE_PER_NODE if local_processes <= 1 else ONE_PER_RANK


def _slurm_hosts(r: _Reader, step: bool) -> tuple[tuple[str, ...], str | None]:
    names = ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST") if step else \
        ("SLURM_JOB_NODELIST", "SLURM_NODELIST")
    text = r.text(*names)
    if text is None:
        return (), None
    try:
        hosts = tuple(expand_hostlist(text))
    except ValueError as exc:
        r.notes.append(f"the node list {text!r} cannot be read: {exc}")
        return (), None
    return hosts, (hosts[0] if hosts else None)


def _tasks_on_node(r: _Reader, node_rank: int | None, processes: int | None, nnodes: int | None) -> int | None:
    """Tasks srun started on this node: from SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE
    ("2(x3),1": 2 on each of the first three nodes, 1 on the fourth), else an even split."""
    text = r.text("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
    if text is not None:
        try:
            per_node = expand_tasks_per_node(text)
        except ValueError as exc:
            r.notes.append(f"the tasks per node {text!r} cannot be read: {exc}")
        else:
            if node_rank is not None and node_rank < len(per_node):
                return per_node[node_rank]
            if len(set(per_node)) == 1:
                return per_node[0]
    per_node_fixed = r.integer("SLURM_NTASKS_PER_NODE")
    if per_node_fixed is not None:
        return per_node_fixed
    if processes is not None and nnodes:
        return -(-processes // nnodes)  # the most any node runs: the one that matters for the check
    return None


# --- Slurm's compressed lists -----------------------------------------------------------------

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_REPEAT = re.compile(r"^(\d+)(?:\(x(\d+)\))?$")


def expand_hostlist(text: str) -> list[str]:
    """``node[01-03,07],gpu5`` -> node01, node02, node03, node07, gpu5 (zero padding kept);
    several bracket groups in one name expand as a product (``r[1-2]-n[1-2]``: r1-n1, r1-n2, ...)."""
    hosts: list[str] = []
    for item in _split_top_level(text.strip()):
        hosts.extend(_expand_item(item))
        if len(hosts) > MAX_HOSTS:
            raise ValueError(f"more than {MAX_HOSTS} hosts")
    return hosts


def _split_top_level(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth > 1:
                raise ValueError("nested '['")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ValueError("']' without '['")
        elif char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError("'[' without ']'")
    items.append(text[start:])
    if any(not item for item in items):
        raise ValueError("an empty host name")
    return items


def _expand_item(item: str) -> list[str]:
    open_at = item.find("[")
    if open_at < 0:
        return [item]
    close_at = item.index("]", open_at)
    prefix, body, rest = item[:open_at], item[open_at + 1:close_at], item[close_at + 1:]
    tails = _expand_item(rest)
    return [f"{prefix}{number}{tail}" for number in _expand_ranges(body) for tail in tails]


def _expand_ranges(body: str) -> list[str]:
    numbers: list[str] = []
    for part in body.split(","):
        match = _RANGE.match(part.strip())
        if not match:
            raise ValueError(f"{part!r} is not N or N-M")
        low, high = match.group(1), match.group(2) or match.group(1)
        if int(high) < int(low):
            raise ValueError(f"{part!r} runs backwards")
        if int(high) - int(low) >= MAX_HOSTS:
            raise ValueError(f"more than {MAX_HOSTS} hosts")
        width = len(low)
        numbers.extend(str(n).zfill(width) for n in range(int(low), int(high) + 1))
    return numbers


def expand_tasks_per_node(text: str) -> list[int]:
    """Slurm's ``2(x3),1`` -> [2, 2, 2, 1]."""
    counts: list[int] = []
    for part in text.split(","):
        match = _REPEAT.match(part.strip())
        if not match:
            raise ValueError(f"{part!r} is not N or N(xM)")
        repeat = int(match.group(2) or 1)
        if len(counts) + repeat > MAX_HOSTS:
            raise ValueError(f"more than {MAX_HOSTS} nodes")
        counts.extend([int(match.group(1))] * repeat)
    return counts


# --- the mistakes, in words -------------------------------------------------------------------


@dataclass(frozen=True)
class Mistake:
    reference: str  # kebab-case, stable: what tests and users match on
    message: str
    hint: str


def mistakes(context: LaunchContext, nnodes: int, nproc: int) -> tuple[Mistake, ...]:
    """What goes wrong if ddplab's own launcher runs here with --nnodes/--nproc, in words.

    ddplab's launcher is one per node: it starts ``nproc`` ranks and meets ``nnodes - 1`` other
    launchers. Started once per rank by another launcher, it forms as many independent jobs.
    Findings, not verdicts: the caller decides whether one stops the run.
    """
    if context.role == ONE_PER_RANK and (context.processes or context.independent_launchers_per_node) > 1:
        return (_one_launcher_per_rank(context, nnodes, nproc),)
    if context.launcher == SLURM_ALLOCATION and (context.nnodes or 1) > 1:
        return (Mistake("not-started-by-srun",
                        f"this Slurm job has {context.nnodes} nodes, but ddplab was not started by srun: it runs on "
                        f"this node only",
                        f"srun --ntasks-per-node=1 ddplab train --nproc {nproc} --nnodes {context.nnodes} "
                        f"--rdzv-endpoint {_endpoint_example(context)}"),)
    if context.nnodes and context.nnodes > 1 and nnodes != context.nnodes:
        return (Mistake("nnodes-disagrees",
                        f"{context.launcher} runs ddplab on {context.nnodes} nodes but --nnodes is {nnodes}: "
                        + ("each node would form a job of its own" if nnodes == 1
                           else "the rendezvous would never complete"),
                        f"give --nnodes {context.nnodes} --rdzv-endpoint {_endpoint_example(context)} on every node"),)
    return ()


def _one_launcher_per_rank(context: LaunchContext, nnodes: int, nproc: int) -> Mistake:
    started = context.processes or context.independent_launchers_per_node
    where = _what_started(context)
    if nnodes == 1:
        size = "world size 1" if nproc == 1 else f"world size {nproc} each"
        outcome = f"{started} independent jobs of {size}, not one job of world size {started * nproc}"
    else:
        outcome = (f"{started} launchers for a job of {nnodes} machines (one launcher per node is expected): the "
                   f"extra ones form jobs of their own or never complete the rendezvous")
    return Mistake("one-launcher-per-rank",
                   f"{where}, and each one is a ddplab launcher starting {nproc} rank(s) of its own: {outcome}",
                   _per_node_hint(context, nproc))


def _what_started(context: LaunchContext) -> str:
    per_node = context.local_processes
    here = f" ({per_node} on this node)" if per_node else ""
    if context.launcher == TORCHRUN:
        return f"torchrun started {context.processes} processes (WORLD_SIZE={context.processes}){here}"
    if context.launcher == SRUN:
        return f"srun started {context.processes} tasks on {context.nnodes or '?'} node(s){here}"
    return f"{context.launcher} started {context.processes} processes{here}"


def _per_node_hint(context: LaunchContext, nproc: int) -> str:
    ranks = context.local_processes or nproc
    nodes = context.nnodes or 1
    across = f" --nnodes {nodes} --rdzv-endpoint {_endpoint_example(context)}" if nodes > 1 else ""
    if context.launcher == TORCHRUN:
        return (f"run ddplab itself once per node (it launches through torchrun's engine): ddplab train --nproc {ranks}"
                f"{across}; for your own script under supervision use `ddplab launch` in place of torchrun")
    if context.launcher == SRUN:
        return (f"start one ddplab per node: srun --ntasks-per-node=1 ddplab train --nproc {ranks}{across}")
    return (f"start one ddplab per node (Open MPI: mpirun --map-by ppr:1:node; MPICH/Intel MPI: mpirun -ppn 1) "
            f"with --nproc {ranks}{across}")


def _endpoint_example(context: LaunchContext) -> str:
    return f"{context.endpoint_host or 'HOST'}:{context.endpoint_port or DEFAULT_PORT}"


# --- what a ddplab command runs as here --------------------------------------------------------


@dataclass(frozen=True)
class Asked:
    """The launch options a command line gave; None: not given (the launcher's, or the default)."""

    nproc: int | None = None
    nnodes: int | None = None
    rdzv_endpoint: str | None = None
    rdzv_host: str | None = None


@dataclass(frozen=True)
class Resolved:
    """The launch options to run with, and where each one taken from the launcher came from, in words."""

    nproc: int | None  # None: the command's default
    nnodes: int
    rdzv_endpoint: str | None
    rdzv_host: str
    started_by: str | None  # None: ddplab's own launcher starts the ranks; TORCHRUN: this process is one rank
    taken: tuple[str, ...] = ()  # "--nnodes 2 (srun: SLURM_STEP_NUM_NODES=2)", ...
    notes: tuple[str, ...] = ()  # what the launcher could not say


def resolve(context: LaunchContext, asked: Asked) -> Resolved:
    """What a ddplab command runs as under this launcher (pure: the context is ``detect``'s).

    - torchrun: this process is one of torchrun's ranks, so ddplab runs its workload here as that rank
      (nproc and nnodes are torchrun's; contradicting them, or naming a rendezvous, is refused).
    - srun / mpirun, one task per node: ddplab's launcher on each node; nodes, the rendezvous endpoint
      (the first node, port DEFAULT_PORT) and who hosts the store (node rank 0) come from the launcher
      unless given.
    - the mistake of several launchers per node (N independent jobs), or nodes that disagree: refused
      (UsageError, exit 2) with ``mistakes``' words.
    """
    from ..errors import UsageError

    if context.launcher == TORCHRUN and context.role == ONE_PER_RANK:
        return _as_torchrun_rank(context, asked)
    nnodes = asked.nnodes if asked.nnodes is not None else (context.nnodes or 1) if _per_node(context) else 1
    refusal = _refusal(context, nnodes, asked)
    if refusal is not None:
        raise UsageError(refusal.reference, refusal.message, hint=refusal.hint)
    taken = []
    if asked.nnodes is None and nnodes > 1:
        taken.append(f"--nnodes {nnodes} ({context.launcher}: {_said(context, 'NNODES', 'NUM_NODES', 'SIZE')})")
    endpoint, host = asked.rdzv_endpoint, asked.rdzv_host or "auto"
    if endpoint is None and nnodes > 1 and context.endpoint_host:
        endpoint = f"{context.endpoint_host}:{context.endpoint_port or DEFAULT_PORT}"
        taken.append(f"--rdzv-endpoint {endpoint} (the first node of {_said(context, 'NODELIST')})")
        if asked.rdzv_host is None and context.node_rank is not None:
            # The scheduler's node 0 is the endpoint's node: it hosts the store, the others never do (a port
            # another job holds there is then an error, not a store to join).
            host = "yes" if context.node_rank == 0 else "no"
            taken.append(f"--rdzv-host {host} (node rank {context.node_rank}: {_said(context, 'NODEID', 'RANK')})")
    if endpoint is None and nnodes > 1 and context.launcher == MPIRUN:
        raise UsageError("rdzv-endpoint-required", f"--nnodes {nnodes} under mpirun needs --rdzv-endpoint HOST:PORT",
                         hint=next((n for n in context.notes if "--rdzv-endpoint" in n), None))
    notes = list(context.notes)
    if context.role == ROLE_UNKNOWN:
        notes.append(f"{context.launcher} does not say how many processes it started on this node: ddplab assumes "
                     f"one (a launcher per node)")
    return Resolved(asked.nproc, nnodes, endpoint, host, None, tuple(taken), tuple(notes))


def _per_node(context: LaunchContext) -> bool:
    """A launcher whose processes are ddplab launchers, one per node (as far as it says)."""
    return context.launcher in (SRUN, MPIRUN) and context.role != ONE_PER_RANK


def _refusal(context: LaunchContext, nnodes: int, asked: Asked) -> Mistake | None:
    """The mistake that makes this run wrong, if any. An sbatch script on one node of a larger allocation
    runs on that node: wrong only when it asks for several nodes (it would wait for them forever)."""
    for mistake in mistakes(context, nnodes, asked.nproc or 1):
        if mistake.reference != "not-started-by-srun" or nnodes > 1:
            return mistake
    return None


def _as_torchrun_rank(context: LaunchContext, asked: Asked) -> Resolved:
    from ..errors import UsageError

    theirs = {"--nproc": context.local_processes, "--nnodes": context.nnodes}
    for flag, given in (("--nproc", asked.nproc), ("--nnodes", asked.nnodes)):
        if given is not None and theirs[flag] is not None and given != theirs[flag]:
            raise UsageError("launcher-disagrees",
                             f"{flag} {given}, but torchrun started {theirs[flag]} "
                             f"({_said(context, 'LOCAL_WORLD_SIZE' if flag == '--nproc' else 'GROUP_WORLD_SIZE')}): "
                             f"under torchrun this process is one of its ranks",
                             hint=f"leave {flag} out, or change torchrun's own options")
    if asked.rdzv_endpoint is not None or asked.rdzv_host is not None:
        raise UsageError("not-under-torchrun",
                         "--rdzv-endpoint/--rdzv-host: torchrun has already joined this process to its job "
                         f"({_said(context, 'MASTER_ADDR', 'MASTER_PORT')})",
                         hint="leave them out: torchrun's own --rdzv-endpoint decides where its ranks meet")
    taken = (f"this process is rank {context.process_index} of {context.processes} "
             f"({_said(context, 'RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE', 'GROUP_WORLD_SIZE')})",)
    return Resolved(context.local_processes, context.nnodes or 1, None, "auto", TORCHRUN, taken, context.notes)


def _said(context: LaunchContext, *fragments: str) -> str:
    """The launcher's variables whose names contain one of ``fragments``, as NAME=value."""
    found = [e for e in context.evidence if any(f in e.partition("=")[0] for f in fragments)]
    return ", ".join(found) or context.launcher
