"""What torchrun, srun and mpirun told a process, and the mistakes that follow, from environments alone."""

import pytest

from ddplab.cluster.launcher_env import (
    MPIRUN,
    NONE,
    ONE_PER_NODE,
    ONE_PER_RANK,
    ROLE_UNKNOWN,
    SLURM_ALLOCATION,
    SRUN,
    TORCHRUN,
    detect,
)
from ddplab.cluster.launchers import Asked, mistakes, resolve
from ddplab.cluster.launcher_env import expand_hostlist, expand_tasks_per_node
from ddplab.records.config import LaunchOptions
from ddplab.errors import UsageError

# What each launcher really sets (values as on a 2-node job); only the variables read matter.
TORCHRUN_WORKER = {"TORCHELASTIC_RUN_ID": "job7", "RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1",
                   "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.1",
                   "MASTER_PORT": "29500", "TORCHELASTIC_RESTART_COUNT": "0"}
SRUN_ONE_PER_NODE = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_NNODES": "3", "SLURM_STEP_NUM_NODES": "3",
                     "SLURM_NODEID": "1", "SLURM_NTASKS": "3", "SLURM_STEP_NUM_TASKS": "3", "SLURM_PROCID": "1",
                     "SLURM_LOCALID": "0", "SLURM_JOB_NODELIST": "node[01-03]", "SLURM_STEP_NODELIST": "node[01-03]",
                     "SLURM_TASKS_PER_NODE": "1(x3)", "SLURM_STEP_TASKS_PER_NODE": "1(x3)"}
# `srun -n 4 ddplab train` on one node: four tasks, each a launcher
SRUN_FOUR_TASKS = {"SLURM_JOB_ID": "4243", "SLURM_STEP_ID": "0", "SLURM_NNODES": "1", "SLURM_NODEID": "0",
                   "SLURM_NTASKS": "4", "SLURM_PROCID": "2", "SLURM_LOCALID": "2", "SLURM_JOB_NODELIST": "gpu7",
                   "SLURM_TASKS_PER_NODE": "4"}
OPEN_MPI_ONE_PER_NODE = {"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
                         "OMPI_COMM_WORLD_LOCAL_SIZE": "1"}


def test_no_launcher_is_one_launcher_for_one_node():
    context = detect({"HOME": "/root"})
    assert (context.launcher, context.role, context.nnodes, context.endpoint_host) == (NONE, ONE_PER_NODE, None, None)
    assert mistakes(context, nnodes=1, nproc=4) == ()


def test_inside_torchrun_every_process_is_a_rank():
    context = detect(TORCHRUN_WORKER)
    assert (context.launcher, context.role) == (TORCHRUN, ONE_PER_RANK)
    assert (context.processes, context.process_index, context.local_processes, context.local_index) == (4, 3, 2, 1)
    assert (context.nnodes, context.node_rank) == (2, 1)
    assert (context.endpoint_host, context.endpoint_port, context.job_id) == ("10.0.0.1", 29500, "job7")
    assert "WORLD_SIZE=4" in context.evidence and "GROUP_RANK=1" in context.evidence


def test_srun_with_one_task_per_node_is_one_launcher_per_node_and_the_first_node_hosts():
    context = detect(SRUN_ONE_PER_NODE)
    assert (context.launcher, context.role) == (SRUN, ONE_PER_NODE)
    assert (context.nnodes, context.node_rank, context.local_processes) == (3, 1, 1)
    assert context.hosts == ("node01", "node02", "node03") and context.endpoint_host == "node01"
    assert context.job_id == "4242"
    assert mistakes(context, nnodes=3, nproc=8) == ()


def test_a_step_on_part_of_the_allocation_uses_the_steps_nodes():
    env = {**SRUN_ONE_PER_NODE, "SLURM_STEP_NUM_NODES": "1", "SLURM_STEP_NUM_TASKS": "1", "SLURM_NODEID": "0",
           "SLURM_STEP_NODELIST": "node03", "SLURM_STEP_TASKS_PER_NODE": "1"}
    context = detect(env)
    assert (context.nnodes, context.hosts, context.endpoint_host) == (1, ("node03",), "node03")


def test_srun_with_four_tasks_makes_four_world_size_1_jobs_and_says_so():
    context = detect(SRUN_FOUR_TASKS)
    assert (context.role, context.processes, context.local_processes, context.process_index) == (ONE_PER_RANK, 4, 4, 2)
    (mistake,) = mistakes(context, nnodes=1, nproc=1)
    assert mistake.reference == "one-launcher-per-rank"
    assert mistake.message == ("srun started 4 tasks on 1 node(s) (4 on this node), and each one is a ddplab launcher "
                               "starting 1 rank(s) of its own: 4 independent jobs of world size 1, not one job of "
                               "world size 4")
    assert mistake.hint == "start one ddplab per node: srun --ntasks-per-node=1 ddplab train --nproc 4"


def test_srun_with_two_tasks_per_node_on_two_nodes_is_one_launcher_too_many_per_node():
    env = {"SLURM_JOB_ID": "9", "SLURM_STEPID": "1", "SLURM_NNODES": "2", "SLURM_NODEID": "1", "SLURM_NTASKS": "4",
           "SLURM_PROCID": "3", "SLURM_LOCALID": "1", "SLURM_JOB_NODELIST": "gpu[1-2]", "SLURM_TASKS_PER_NODE": "2(x2)"}
    context = detect(env)
    assert (context.role, context.local_processes, context.nnodes) == (ONE_PER_RANK, 2, 2)
    (mistake,) = mistakes(context, nnodes=2, nproc=2)
    assert "srun started 4 tasks on 2 node(s) (2 on this node)" in mistake.message
    assert "4 launchers for a job of 2 machines" in mistake.message
    assert mistake.hint == ("start one ddplab per node: srun --ntasks-per-node=1 ddplab train --nproc 2 --nnodes 2 "
                            "--rdzv-endpoint gpu1:29400")


def test_one_launcher_per_node_with_the_wrong_nnodes_is_said():
    (mistake,) = mistakes(detect(SRUN_ONE_PER_NODE), nnodes=1, nproc=8)
    assert mistake.reference == "nnodes-disagrees"
    assert mistake.message == "srun runs ddplab on 3 nodes but --nnodes is 1: each node would form a job of its own"
    assert mistake.hint == "give --nnodes 3 --rdzv-endpoint node01:29400 on every node"


def test_ddplab_started_by_torchrun_makes_one_job_per_worker():
    (mistake,) = mistakes(detect(TORCHRUN_WORKER), nnodes=1, nproc=2)
    assert mistake.message.startswith("torchrun started 4 processes (WORLD_SIZE=4) (2 on this node), and each one is "
                                      "a ddplab launcher")
    assert "4 independent jobs of world size 2 each, not one job of world size 8" in mistake.message
    assert "ddplab train --nproc 2 --nnodes 2 --rdzv-endpoint 10.0.0.1:29500" in mistake.hint


def test_an_sbatch_script_runs_on_the_first_node_only():
    env = {"SLURM_JOB_ID": "77", "SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "n[7-8]", "SLURM_NTASKS": "2"}
    context = detect(env)
    assert (context.launcher, context.endpoint_host, context.nnodes) == (SLURM_ALLOCATION, "n7", 2)
    (mistake,) = mistakes(context, nnodes=2, nproc=4)  # right --nnodes, but only one node runs it
    assert mistake.reference == "not-started-by-srun" and "it runs on this node only" in mistake.message
    assert mistake.hint == "srun --ntasks-per-node=1 ddplab train --nproc 4 --nnodes 2 --rdzv-endpoint n7:29400"


def test_open_mpi_one_process_per_node_is_a_launcher_per_node():
    context = detect(OPEN_MPI_ONE_PER_NODE)
    assert (context.launcher, context.role, context.nnodes, context.node_rank) == (MPIRUN, ONE_PER_NODE, 2, 1)
    assert context.endpoint_host is None and "give --rdzv-endpoint HOST:PORT" in context.notes[0]
    assert mistakes(context, nnodes=2, nproc=4) == ()


def test_open_mpi_wins_over_the_slurm_step_its_daemons_ran_in_and_finds_hosts_there():
    env = {**SRUN_ONE_PER_NODE, **OPEN_MPI_ONE_PER_NODE, "OMPI_COMM_WORLD_SIZE": "3", "OMPI_COMM_WORLD_RANK": "2"}
    context = detect(env)
    assert (context.launcher, context.nnodes, context.node_rank) == (MPIRUN, 3, 2)
    assert context.endpoint_host == "node01" and context.notes == ()


def test_mpirun_with_eight_processes_on_two_nodes_counts_nodes_and_says_the_mistake():
    env = {"OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}
    context = detect(env)
    assert (context.role, context.nnodes, context.node_rank) == (ONE_PER_RANK, 2, None)
    (mistake,) = mistakes(context, nnodes=1, nproc=1)
    assert mistake.message.startswith("mpirun started 8 processes (4 on this node)")
    assert "8 independent jobs of world size 1" in mistake.message
    assert "mpirun --map-by ppr:1:node" in mistake.hint


def test_hydra_pmi_and_pmix_are_read_too():
    hydra = detect({"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "1"})
    assert (hydra.launcher, hydra.role, hydra.nnodes, hydra.node_rank) == (MPIRUN, ONE_PER_NODE, 2, 1)
    pmix = detect({"PMIX_RANK": "3", "PMIX_NAMESPACE": "prterun-x-1"})
    assert (pmix.role, pmix.process_index, pmix.job_id) == (ROLE_UNKNOWN, 3, "prterun-x-1")
    assert mistakes(pmix, nnodes=1, nproc=1) == ()  # not known to be wrong: not claimed
    assert "does not say how many processes share this node" in pmix.notes[0]


def test_garbage_in_a_variable_is_noted_not_believed():
    context = detect({**SRUN_FOUR_TASKS, "SLURM_NTASKS": "four", "SLURM_JOB_NODELIST": "gpu[7"})
    assert context.processes is None and context.hosts == () and context.endpoint_host is None
    assert "SLURM_NTASKS='four' is not a whole number: ignored" in context.notes
    assert any("cannot be read: '[' without ']'" in n for n in context.notes)


@pytest.mark.parametrize("text, hosts", [
    ("node01", ["node01"]),
    ("node[01-03,07]", ["node01", "node02", "node03", "node07"]),
    ("a1,b[1-2],c", ["a1", "b1", "b2", "c"]),
    ("gpu[008-010]", ["gpu008", "gpu009", "gpu010"]),
    ("r[1-2]-n[1-2]", ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]),
    ("n[9-11]-ib", ["n9-ib", "n10-ib", "n11-ib"]),
])
def test_slurm_host_lists_expand(text, hosts):
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize("text, why", [("node[01-03", "'[' without ']'"), ("node]1", "']' without '['"),
                                       ("n[3-1]", "runs backwards"), ("n[a-b]", "is not N or N-M"),
                                       ("a,,b", "an empty host name"), ("n[0-99999999]", "more than 65536 hosts")])
def test_malformed_or_huge_host_lists_are_refused(text, why):
    with pytest.raises(ValueError, match=None) as caught:
        expand_hostlist(text)
    assert why in str(caught.value)


def test_tasks_per_node_expand():
    assert expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert expand_tasks_per_node("4") == [4]
    with pytest.raises(ValueError):
        expand_tasks_per_node("2(3)")


# --- what a ddplab command runs as under each launcher (resolve, and the command line's options) -------------

def _options(argv: list[str], environ: dict):
    import argparse

    from ddplab.basics import cli_options
    from ddplab.commands.options import launch_options

    parser = argparse.ArgumentParser()
    cli_options.add_arguments(parser, LaunchOptions)
    return launch_options(LaunchOptions(), cli_options.values_given(LaunchOptions, parser.parse_args(argv)), environ)


SRUN_TWO_NODES = {"SLURM_JOB_ID": "5", "SLURM_STEP_ID": "0", "SLURM_NNODES": "2", "SLURM_STEP_NUM_NODES": "2",
                  "SLURM_NTASKS": "2", "SLURM_STEP_NUM_TASKS": "2", "SLURM_TASKS_PER_NODE": "1(x2)",
                  "SLURM_STEP_NODELIST": "10.9.0.[1-2]", "SLURM_JOB_NODELIST": "10.9.0.[1-2]"}


def _srun_node(node: int) -> dict:
    return {**SRUN_TWO_NODES, "SLURM_NODEID": str(node), "SLURM_PROCID": str(node), "SLURM_LOCALID": "0"}


def test_under_srun_one_launcher_per_node_takes_nodes_endpoint_and_host_from_slurm():
    first, second = _options(["--nproc", "2"], _srun_node(0)), _options(["--nproc", "2"], _srun_node(1))
    assert (first.nnodes, first.rdzv_endpoint, first.rdzv_host) == (2, "10.9.0.1:29400", "yes")
    assert (second.nnodes, second.rdzv_endpoint, second.rdzv_host) == (2, "10.9.0.1:29400", "no")
    assert first.nproc == second.nproc == 2 and first.started_by is None


def test_what_the_command_line_gives_wins_over_slurm():
    given = _options(["--rdzv-endpoint", "head:1234", "--rdzv-host", "auto"], _srun_node(1))
    assert (given.nnodes, given.rdzv_endpoint, given.rdzv_host) == (2, "head:1234", "auto")
    resolved = resolve(detect(_srun_node(1)), Asked(rdzv_endpoint="head:1234"))
    assert resolved.rdzv_host == "auto" and resolved.taken == ("--nnodes 2 (srun: SLURM_STEP_NUM_NODES=2)",)


def test_srun_with_four_tasks_on_a_node_is_refused_with_the_launchers_words():
    with pytest.raises(UsageError) as err:
        _options(["--nproc", "1"], SRUN_FOUR_TASKS)
    assert err.value.exit_code == 2 and err.value.reference == "one-launcher-per-rank"
    assert "4 independent jobs of world size 1, not one job of world size 4" in err.value.message
    assert err.value.hint == "start one ddplab per node: srun --ntasks-per-node=1 ddplab train --nproc 4"


def test_nodes_that_disagree_with_srun_are_refused():
    with pytest.raises(UsageError) as err:
        _options(["--nnodes", "3"], _srun_node(0))
    assert err.value.reference == "nnodes-disagrees"


def test_an_sbatch_script_may_run_on_its_node_but_not_wait_for_nodes_srun_never_started():
    allocation = {"SLURM_JOB_ID": "77", "SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "n[7-8]", "SLURM_NTASKS": "2"}
    assert _options([], allocation).nnodes == 1
    with pytest.raises(UsageError) as err:
        _options(["--nnodes", "2", "--rdzv-endpoint", "n7:29400"], allocation)
    assert err.value.reference == "not-started-by-srun"


def test_under_mpirun_one_process_per_node_takes_the_nodes_and_needs_an_endpoint():
    with pytest.raises(UsageError) as err:
        _options([], OPEN_MPI_ONE_PER_NODE)
    assert err.value.reference == "rdzv-endpoint-required" and "--rdzv-endpoint" in err.value.hint
    opts = _options(["--rdzv-endpoint", "10.9.0.1:29400"], OPEN_MPI_ONE_PER_NODE)
    assert (opts.nnodes, opts.rdzv_endpoint, opts.rdzv_host) == (2, "10.9.0.1:29400", "auto")
    inside_slurm = {**_srun_node(1), **OPEN_MPI_ONE_PER_NODE}  # mpirun's daemons in a Slurm step: hosts known
    opts = _options([], inside_slurm)
    assert (opts.nnodes, opts.rdzv_endpoint, opts.rdzv_host) == (2, "10.9.0.1:29400", "no")


def test_mpirun_with_several_processes_per_node_is_refused():
    env = {"OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}
    with pytest.raises(UsageError) as err:
        _options([], env)
    assert err.value.reference == "one-launcher-per-rank" and "8 independent jobs" in err.value.message


def test_under_torchrun_ddplab_is_one_of_its_ranks():
    opts = _options([], TORCHRUN_WORKER)
    assert (opts.started_by, opts.nproc, opts.nnodes, opts.rdzv_endpoint) == ("torchrun", 2, 2, None)
    assert opts.sharing_daemon == "off"  # no rank can start a daemon for the others
    assert _options(["--nproc", "2", "--nnodes", "2"], TORCHRUN_WORKER) == opts


@pytest.mark.parametrize("argv, reference, words", [
    (["--nproc", "4"], "launcher-disagrees", "--nproc 4, but torchrun started 2 (LOCAL_WORLD_SIZE=2)"),
    (["--nnodes", "1"], "launcher-disagrees", "--nnodes 1, but torchrun started 2 (GROUP_WORLD_SIZE=2)"),
    (["--rdzv-endpoint", "x:1"], "not-under-torchrun", "torchrun has already joined this process to its job"),
    (["--hang-timeout", "5"], "not-under-torchrun", "ddplab's supervisor lives in its own launcher"),
    (["--mps"], "not-under-torchrun", "the sharing daemon is started by ddplab's launcher"),
])
def test_under_torchrun_what_only_ddplabs_launcher_does_is_refused(argv, reference, words):
    with pytest.raises(UsageError) as err:
        _options(argv, TORCHRUN_WORKER)
    assert err.value.reference == reference and words in err.value.message


def test_without_a_launcher_the_command_line_is_taken_as_it_is():
    assert _options([], {}) == LaunchOptions()
    assert _options(["--nproc", "3", "--nnodes", "2", "--rdzv-endpoint", "a:1"], {}) == \
        LaunchOptions(nproc=3, nnodes=2, rdzv_endpoint="a:1")
