"""What an existing launcher (torchrun, srun, mpirun) told this process, read from its environment.

``detect(environ)`` -> ``LaunchContext``: which launcher, how many processes it started, this process's index,
nodes, the host that should serve the rendezvous, and this process's role: ``ONE_PER_NODE`` (ddplab starts the
ranks itself) or ``ONE_PER_RANK`` (every process is a rank already). Pure functions over an environment mapping.

When several launchers left variables, the innermost wins: torchrun's workers carry TORCHELASTIC_RUN_ID; Open
MPI's processes carry OMPI_COMM_WORLD_* even when srun started its daemons; srun's tasks carry SLURM_PROCID and a
step id; Hydra and PMIx launchers PMI_RANK/PMI_SIZE or PMIX_RANK. A Slurm allocation without a step runs on one
node only. Slurm's compressed lists are expanded here too: host lists (``node[01-03,07]``, ``r[1-2]-n[1-2]``) and
tasks per node (``2(x3),1``), as srun and sbatch set them in SLURM_JOB_NODELIST and SLURM_TASKS_PER_NODE.
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


def detect(environ: Mapping[str, str]) -> LaunchContext:
    """The innermost launcher that started this process, and what it says about the job."""
    for reader in (_torchrun, _open_mpi, _srun, _pmi, _slurm_allocation):
        context = reader(environ)
        if context is not None:
            return context
    return LaunchContext(NONE, ONE_PER_NODE)


# --- one reader per launcher -------------------------------------------------------------------


class _EnvReader:
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
            name = next(n for n in names if self.used.get(n) == value)
            self.notes.append(f"{name}={value!r} is not a whole number: ignored")
            return None
        return number if number >= 0 else None

    def context(self, launcher: str, role: str, **read) -> LaunchContext:
        """What was read, with the variables that said so (NAME=value) and the notes."""
        return LaunchContext(launcher, role, **read, evidence=tuple(f"{k}={v}" for k, v in self.used.items()),
                             notes=tuple(self.notes))


def _torchrun(environ: Mapping[str, str]) -> LaunchContext | None:
    if "TORCHELASTIC_RUN_ID" not in environ:
        return None
    r = _EnvReader(environ)
    run_id = r.text("TORCHELASTIC_RUN_ID")
    return r.context(
        TORCHRUN, ONE_PER_RANK, processes=r.integer("WORLD_SIZE"), process_index=r.integer("RANK"),
        local_processes=r.integer("LOCAL_WORLD_SIZE"), local_index=r.integer("LOCAL_RANK"),
        nnodes=r.integer("GROUP_WORLD_SIZE"), node_rank=r.integer("GROUP_RANK"),
        endpoint_host=r.text("MASTER_ADDR"), endpoint_port=r.integer("MASTER_PORT"), job_id=run_id)


def _open_mpi(environ: Mapping[str, str]) -> LaunchContext | None:
    if "OMPI_COMM_WORLD_SIZE" not in environ:
        return None
    r = _EnvReader(environ)
    size, rank = r.integer("OMPI_COMM_WORLD_SIZE"), r.integer("OMPI_COMM_WORLD_RANK")
    local_size, local_rank = r.integer("OMPI_COMM_WORLD_LOCAL_SIZE"), r.integer("OMPI_COMM_WORLD_LOCAL_RANK")
    return _mpi_context(r, size, rank, local_size, local_rank)


def _pmi(environ: Mapping[str, str]) -> LaunchContext | None:
    if not ({"PMI_SIZE", "PMI_RANK", "PMIX_RANK"} & set(environ)):
        return None
    r = _EnvReader(environ)
    size, rank = r.integer("PMI_SIZE"), r.integer("PMI_RANK", "PMIX_RANK")
    # Hydra (MPICH, Intel MPI) says how many processes share this node; plain PMIx does not.
    local_size, local_rank = r.integer("MPI_LOCALNRANKS"), r.integer("MPI_LOCALRANKID")
    return _mpi_context(r, size, rank, local_size, local_rank)


def _mpi_context(r: _EnvReader, size, rank, local_size, local_rank) -> LaunchContext:
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
    return r.context(MPIRUN, _role(local_size), processes=size, process_index=rank, local_processes=local_size,
                     local_index=local_rank, nnodes=nnodes, node_rank=node_rank, endpoint_host=endpoint, hosts=hosts,
                     job_id=r.text("PMIX_NAMESPACE"))


def _srun(environ: Mapping[str, str]) -> LaunchContext | None:
    if "SLURM_PROCID" not in environ or not ({"SLURM_STEP_ID", "SLURM_STEPID"} & set(environ)):
        return None
    r = _EnvReader(environ)
    # A step may use part of the allocation (srun -N1 in a 2-node job): the step's values first.
    processes = r.integer("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS")
    nnodes = r.integer("SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES")
    node_rank = r.integer("SLURM_NODEID")
    local = _tasks_on_node(r, node_rank, processes, nnodes)
    hosts, endpoint = _slurm_hosts(r, step=True)
    return r.context(SRUN, _role(local), processes=processes, process_index=r.integer("SLURM_PROCID"),
                     local_processes=local, local_index=r.integer("SLURM_LOCALID"), nnodes=nnodes, node_rank=node_rank,
                     endpoint_host=endpoint, hosts=hosts, job_id=r.text("SLURM_JOB_ID", "SLURM_JOBID"))


def _slurm_allocation(environ: Mapping[str, str]) -> LaunchContext | None:
    if not ({"SLURM_JOB_ID", "SLURM_JOBID"} & set(environ)):
        return None
    r = _EnvReader(environ)
    hosts, endpoint = _slurm_hosts(r, step=False)
    nnodes = r.integer("SLURM_NNODES", "SLURM_JOB_NUM_NODES")
    return r.context(SLURM_ALLOCATION, ONE_PER_NODE, processes=1, process_index=0, local_processes=1, local_index=0,
                     nnodes=nnodes, node_rank=0 if nnodes == 1 else None, endpoint_host=endpoint, hosts=hosts,
                     job_id=r.text("SLURM_JOB_ID", "SLURM_JOBID"))


def _role(local_processes: int | None) -> str:
    if local_processes is None:
        return ROLE_UNKNOWN
    return ONE_PER_NODE if local_processes <= 1 else ONE_PER_RANK


def _slurm_hosts(r: _EnvReader, step: bool) -> tuple[tuple[str, ...], str | None]:
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


def _tasks_on_node(r: _EnvReader, node_rank: int | None, processes: int | None, nnodes: int | None) -> int | None:
    """Tasks srun started on this node: from SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE ("2(x3),1"), else
    an even split."""
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

MAX_HOSTS = 65_536  # a host list longer than this is refused rather than expanded
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_REPEAT = re.compile(r"^(\d+)(?:\(x(\d+)\))?$")


def expand_hostlist(text: str) -> list[str]:
    """``node[01-03,07],gpu5`` -> node01, node02, node03, node07, gpu5 (zero padding kept); several bracket groups
    in one name expand as a product."""
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
