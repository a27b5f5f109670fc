"""What a ddplab command runs as under an existing launcher (torchrun, srun, mpirun), and what goes wrong when it
is started wrongly, in words (``resolve``, ``mistakes``). What the launcher told this process is read by
launcher_env.py (``detect``); the options come from commands/options.py.

The classic mistake: ``srun -n 4 ddplab train`` or ``torchrun --nproc-per-node 4 ddplab ...`` starts four
launchers, each forming its own job (of world size 1 with --nproc 1) instead of one job of world size 4.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError
from .launcher_env import (DEFAULT_PORT, MPIRUN, ONE_PER_RANK, ROLE_UNKNOWN, SLURM_ALLOCATION, SRUN, TORCHRUN,
                           LaunchContext, detect)

__all__ = ["DEFAULT_PORT", "Asked", "LaunchContext", "Mistake", "Resolved", "detect", "mistakes", "resolve"]


# --- the mistakes, in words -------------------------------------------------------------------


@dataclass(frozen=True)
class Mistake:
    reference: str  # kebab-case, stable: what tests and users match on
    message: str
    hint: str


def mistakes(context: LaunchContext, nnodes: int, nproc: int) -> tuple[Mistake, ...]:
    """What goes wrong if ddplab's own launcher (one per node) runs here with --nnodes/--nproc, in words: started
    once per rank by another launcher, it forms as many independent jobs. Findings, not verdicts."""
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

    - torchrun: this process is one of torchrun's ranks and runs its workload as that rank (contradicting
      torchrun's nproc/nnodes, or naming a rendezvous, is refused).
    - srun / mpirun, one task per node: ddplab's launcher on each node; nodes, endpoint (the first node) and who
      hosts the store (node rank 0) come from the launcher unless given.
    - several launchers per node, or nodes that disagree: refused (UsageError, exit 2) with ``mistakes``' words.
    """
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
