"""`ddplab launch`'s command line: torchrun's own parser and config, ddplab's options apart."""

import os
import sys

import pytest

from ddplab.cli import main
from ddplab.commands import launch
from ddplab.job.config import DEFAULT_HANG_TIMEOUT_S
from ddplab.errors import UsageError
from ddplab.job.boot import Target
from ddplab.job.torchrun_args import resolve


def parse(argv):
    """The command line as `ddplab launch` reads it, resolved as the job would be launched."""
    return resolve(launch.parse(argv))


@pytest.fixture
def script(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print('hello')\n")
    return "train.py"


def test_torchrun_options_ddplab_options_and_the_scripts_own_arguments(script, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    request = parse(["--nproc-per-node", "2", "--hang-timeout", "7", "--out", "job", "--max-restarts",
                                   "0", "--", script, "--lr", "0.1", "--out", "mine", "--hang-timeout", "9"])
    assert request.config.nproc_per_node == 2
    assert (request.hang_timeout_s, request.out) == (7.0, "job")
    assert request.target == Target("script", script, ("--lr", "0.1", "--out", "mine", "--hang-timeout", "9"))
    assert request.python == sys.executable
    # torchrun sets OMP_NUM_THREADS=1 in its own environment for several ranks; ddplab hands it to the
    # ranks instead, and parsing leaves this process as it was.
    assert request.worker_env == {"OMP_NUM_THREADS": "1"}
    assert "OMP_NUM_THREADS" not in os.environ
    assert "ddplab_hang_timeout" not in request.torchrun and request.torchrun["nproc_per_node"] == "2"


def test_the_straggler_watch_is_on_unless_turned_off(script):
    assert parse([script]).stragglers is True
    off = launch.parse(["--no-stragglers", "--", script])
    assert off.stragglers is False and "--no-stragglers" in off.to_argv()
    assert "--no-stragglers" not in launch.parse([script]).to_argv()
    assert resolve(off).launch_config().stragglers is False


def test_a_job_of_one_rank_is_not_watched_for_stragglers_and_says_why(script):
    from ddplab.job.supervise import straggler_plan
    assert straggler_plan(parse(["--nproc-per-node", "2", script]), None).enabled is True
    alone = straggler_plan(parse(["--nproc-per-node", "1", script]), None)
    assert alone.enabled is False and "one rank" in alone.why_off
    assert straggler_plan(parse(["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-endpoint", "h:29400",
                                 "--rdzv-backend", "c10d", script]), None).enabled is True
    off = straggler_plan(parse(["--no-stragglers", "--nproc-per-node", "2", script]), None)
    assert off.enabled is False and off.why_off == "--no-stragglers"


def test_the_separator_is_optional_as_with_torchrun(script):
    request = parse(["--nproc_per_node=3", script, "--epochs", "1"])
    assert request.config.nproc_per_node == 3
    assert request.target == Target("script", script, ("--epochs", "1"))
    assert request.hang_timeout_s == DEFAULT_HANG_TIMEOUT_S


def test_module_and_no_python_targets(script):
    module = parse(["-m", "json.tool", "--sort-keys"])
    assert module.target == Target("module", "json.tool", ("--sort-keys",))
    command = parse(["--no-python", "echo", "hi"])
    assert command.target == Target("command", "echo", ("hi",))
    assert command.target.boot_argv() == ["--no-python", "echo", "hi"]
    assert module.target.boot_argv() == ["-m", "json.tool", "--sort-keys"]


def test_standalone_as_torchrun_runs_it(script):
    config = parse(["--standalone", "--rdzv-backend", "static", "--rdzv-endpoint", "10.0.0.1:1234", script]).config
    assert (config.rdzv_backend, config.rdzv_endpoint) == ("c10d", "127.0.0.1:0")
    assert config.run_id not in ("", "none")


def test_the_default_single_machine_rendezvous_is_the_installed_torchruns(script):
    """torchrun without rendezvous options: torch 2.13 has no default --master-port and turns its static
    default into c10d on a free port; torch 2.11 keeps static at 127.0.0.1:29500 (seen on the GPU machine).
    ddplab does what the installed torchrun does (either way on loopback only: launch.one_machine_rendezvous)."""
    from torch.distributed.run import get_args_parser

    default_port = get_args_parser().get_default("master_port")
    config = parse([script]).config
    if default_port is None:
        assert (config.rdzv_backend, config.rdzv_endpoint) == ("c10d", "127.0.0.1:0")
        assert config.run_id not in ("", "none")
    else:
        assert (config.rdzv_backend, config.rdzv_endpoint) == ("static", f"127.0.0.1:{default_port}")


def test_several_machines_keep_their_rendezvous(script):
    config = parse(["--nnodes", "1:2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                                  "10.0.0.1:29400", "--rdzv-id", "job7", script]).config
    assert (config.min_nodes, config.max_nodes) == (1, 2)
    assert (config.rdzv_backend, config.rdzv_endpoint, config.run_id) == ("c10d", "10.0.0.1:29400", "job7")
    assert not parse(["--nnodes", "2", "--rdzv-endpoint", "h:1", script]).single_node


def test_ddplab_options_are_not_torchruns():
    """A torch release that adds one of ddplab's option names would change its meaning silently."""
    from torch.distributed.run import get_args_parser

    torchrun_options = {s for action in get_args_parser()._actions for s in action.option_strings}
    assert not torchrun_options & set(launch.DDPLAB_OPTIONS)
    ours = {s for a in launch.build_parser()._actions for s in a.option_strings} - torchrun_options
    assert ours == set(launch.DDPLAB_OPTIONS)


BAD = [
    (["--start-method", "bogus", "train.py"], "invalid-launch-arguments", "invalid choice: 'bogus'"),
    (["--start-method", "bogus", "train.py"], "invalid-launch-arguments", "'spawn', 'fork', 'forkserver'"),
    (["--max-restarts", "two", "train.py"], "invalid-launch-arguments",
     "--max-restarts 'two' is not a whole number written with the digits 0-9"),
    (["--max-restarts", "-1", "train.py"], "invalid-max-restarts", "--max-restarts -1 is out of range"),
    (["--nnodes", "3:1", "train.py"], "invalid-launch-arguments", "min_nodes=3, max_nodes=1"),
    (["--nnodes", "x", "train.py"], "invalid-nnodes", "--nnodes 'x': valid forms are N or MIN:MAX"),
    (["--nproc-per-node", "0", "train.py"], "invalid-nproc-per-node", "--nproc-per-node 0"),
    (["--nproc-per-node", "lots", "train.py"], "invalid-nproc-per-node", "auto, cpu"),
    (["--rdzv-conf", "novalue", "train.py"], "invalid-launch-arguments", "novalue"),
    (["--hang-timeout", "-1", "train.py"], "invalid-hang-timeout", "--hang-timeout -1"),
    (["--hang-timeout", "soon", "train.py"], "invalid-hang-timeout", "--hang-timeout 'soon' is not a number"),
    (["--run-path", "train.py"], "unsupported-option", "--run-path"),
    (["missing.py"], "script-not-found", "'missing.py' does not exist"),
    (["-m", "no_such_module_ddplab"], "module-not-found", "-m no_such_module_ddplab"),
    (["--no-python", "no-such-command-ddplab"], "command-not-found", "no-such-command-ddplab"),
    (["-m", "--no-python", "json"], "invalid-launch-arguments", "-m and --no-python together"),
    (["--nproc-per-node", "2"], "invalid-launch-arguments", "training_script"),
    # Bounded as every other command bounds its ranks and seconds (issue 18): torch checks none of them in time.
    (["--nproc-per-node", "10000", "train.py"], "invalid-nproc-per-node",
     "--nproc-per-node 10000 is out of range; valid: 1 to 64 ranks per node"),
    (["--nproc-per-node", "-3", "train.py"], "invalid-nproc-per-node", "valid: 1 to 64 ranks per node"),
    (["--monitor-interval", "0", "train.py"], "invalid-monitor-interval",
     "--monitor-interval 0.0 is out of range; valid: 0 < seconds <= 86400"),
    (["--monitor-interval", "-1", "train.py"], "invalid-monitor-interval", "--monitor-interval -1.0 is out of range"),
    (["--monitor-interval", "inf", "train.py"], "invalid-monitor-interval",
     "--monitor-interval inf is not a finite number"),
    (["--monitor-interval", "nan", "train.py"], "invalid-monitor-interval", "--monitor-interval nan"),
    (["--rdzv-backend", "bogus", "train.py"], "invalid-rdzv-backend",
     "--rdzv-backend bogus: valid backends are c10d, etcd, etcd-v2, static"),
    (["--hang-timeout", "inf", "train.py"], "invalid-hang-timeout",
     "--hang-timeout inf is not a finite number; valid: 0 <= seconds <= 86400 (0 turns it off)"),
    (["--hang-timeout", "nan", "train.py"], "invalid-hang-timeout", "--hang-timeout nan is not a finite number"),
    (["--hang-timeout", "1e9", "train.py"], "invalid-hang-timeout", "is out of range; valid: 0 <= seconds <= 86400"),
]


@pytest.mark.parametrize("argv, reference, fragment", BAD, ids=[" ".join(a) for a, _, _ in BAD])
def test_bad_input_is_refused_with_the_value_and_the_choices(argv, reference, fragment, script):
    with pytest.raises(UsageError) as caught:
        parse(argv)
    assert caught.value.reference == reference
    assert fragment in caught.value.message


def test_the_largest_count_and_the_slowest_monitor_are_accepted(script):
    request = parse(["--nproc-per-node", "64", "--monitor-interval", "86400", "--hang-timeout", "86400", script])
    assert request.nproc_per_node == 64 and request.config.monitor_interval == 86400
    assert request.hang_timeout_s == 86400


def test_a_word_for_the_process_count_is_bounded_once_torch_has_counted(script, monkeypatch):
    import torch

    monkeypatch.setattr(torch._utils, "cpu_count", lambda: 1000)  # a machine with 1000 cores
    with pytest.raises(UsageError) as caught:
        parse(["--nproc-per-node", "cpu", script])
    assert caught.value.reference == "invalid-nproc-per-node"
    assert caught.value.message == ("--nproc-per-node cpu counts 1000 processes on this machine; valid: 1 to 64 "
                                    "ranks per node")
    monkeypatch.setattr(torch._utils, "cpu_count", lambda: 64)
    assert parse(["--nproc-per-node", "cpu", script]).nproc_per_node == 64


def test_a_rendezvous_backend_a_plug_in_registered_is_known(script, monkeypatch):
    from torch.distributed.elastic.rendezvous import rendezvous_handler_registry

    monkeypatch.setitem(rendezvous_handler_registry._registry, "my-rdzv", lambda params: None)
    assert parse(["--rdzv-backend", "my-rdzv", "--rdzv-endpoint", "store:1", script]).config.rdzv_backend == "my-rdzv"
    with pytest.raises(UsageError) as caught:
        parse(["--rdzv-backend", "bogus", script])
    assert "c10d, etcd, etcd-v2, my-rdzv, static" in caught.value.message


def test_ddplabs_own_backends_are_no_choice_even_once_registered(script, monkeypatch):
    """A process that launched a job has them in elastic's registry (a CI run listed one after another test's)."""
    from torch.distributed.elastic.rendezvous import rendezvous_handler_registry

    from ddplab.cluster import rendezvous

    monkeypatch.setattr(rendezvous_handler_registry, "_registry", dict(rendezvous_handler_registry._registry))
    rendezvous.register()
    rendezvous.register_across_machines()
    with pytest.raises(UsageError) as caught:
        parse(["--rdzv-backend", "bogus", script])
    assert caught.value.message == "--rdzv-backend bogus: valid backends are c10d, etcd, etcd-v2, static"


def test_standalone_replaces_the_backend_as_torchrun_does(script):
    assert parse(["--standalone", "--rdzv-backend", "bogus", script]).config.rdzv_backend == "c10d"


def test_bad_input_exits_2_before_anything_starts(script, tmp_path, capsys):
    assert main(["launch", "--nproc-per-node", "0", "--", script]) == 2
    err = capsys.readouterr().err
    assert "error: invalid-nproc-per-node" in err and "--nproc-per-node 0" in err
    assert not (tmp_path / "ddplab-runs").exists()


def test_help_lists_torchruns_options_and_ddplabs_own_group(capsys):
    with pytest.raises(SystemExit) as done:
        main(["launch", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "--nproc-per-node" in out and "--rdzv-endpoint" in out
    assert "ddplab options" in out and "--hang-timeout" in out


# --- where the job listens: one machine on loopback, everything else the user's -------------------------------

ONE_MACHINE = [
    ([], "127.0.0.1:0"),  # torchrun's default on one machine: --standalone's c10d on a free port
    (["--standalone"], "127.0.0.1:0"),
    (["--rdzv-backend", "static", "--master-port", "29531"], "127.0.0.1:29531"),  # torch 2.11's default, kept port
    (["--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:29400"], "127.0.0.1:29400"),
    (["--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost"], "127.0.0.1:29400"),  # torch's c10d default port
    (["--rdzv-backend", "c10d", "--rdzv-endpoint", "[::1]:1234"], "127.0.0.1:1234"),
]


@pytest.mark.parametrize("options, endpoint", ONE_MACHINE, ids=[" ".join(o) or "default" for o, _ in ONE_MACHINE])
def test_a_one_machine_job_keeps_its_store_on_loopback(script, options, endpoint):
    request = parse([*options, script])
    assert request.rendezvous_theirs is None
    assert request.loopback_endpoint == endpoint


THEIRS = [
    (["--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:29400"], "a job across machines"),
    (["--nnodes", "1:2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "10.0.0.1:29400"], "--nnodes up to 2"),
    (["--rdzv-backend", "c10d", "--rdzv-endpoint", "10.0.0.1:29400"], "you named the rendezvous endpoint 10.0.0.1"),
    (["--rdzv-backend", "static", "--master-addr", "node7", "--master-port", "29531"],
     "you named the rendezvous endpoint node7:29531"),
    (["--rdzv-backend", "etcd-v2", "--rdzv-endpoint", "localhost:2379"], "you chose the etcd-v2 rendezvous"),
]


@pytest.mark.parametrize("options, reason", THEIRS, ids=[" ".join(o) for o, _ in THEIRS])
def test_several_machines_another_host_or_another_rendezvous_stay_the_users(script, options, reason):
    assert reason in parse([*options, script]).rendezvous_theirs


def test_an_endpoint_that_cannot_be_read_is_refused_before_anything_starts(script):
    with pytest.raises(UsageError) as caught:
        parse(["--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:port", script])
    assert caught.value.reference == "invalid-rdzv-endpoint" and caught.value.exit_code == 2
    assert "--rdzv-endpoint localhost:port" in caught.value.message and "HOST:PORT" in caught.value.message


def test_the_ranks_socket_variable_the_user_set_is_kept(script, monkeypatch):
    from ddplab.job.supervise import where_the_job_listens

    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "eth7")
    exposure = where_the_job_listens(parse([script]), "cpu")
    assert [(p.variable, p.value, p.set_by) for p in exposure.sockets] == [("GLOO_SOCKET_IFNAME", "eth7", "user")]
    assert "GLOO_SOCKET_IFNAME" not in exposure.environment()  # nothing of ddplab's replaces it in the ranks
    assert not exposure.loopback_only and "You set GLOO_SOCKET_IFNAME=eth7" in exposure.why_not[0]
    monkeypatch.delenv("GLOO_SOCKET_IFNAME")
    pinned = where_the_job_listens(parse([script]), "cpu")
    assert pinned.loopback_only and set(pinned.environment()) == {"GLOO_SOCKET_IFNAME"}


def test_a_job_across_machines_is_said_not_claimed(script):
    from ddplab.job.supervise import where_the_job_listens

    exposure = where_the_job_listens(parse(["--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                                                  "10.0.0.1:29400", script]), "cpu")
    assert (exposure.single_machine, exposure.loopback_only, exposure.store_port) == (False, False, 29400)
    assert exposure.environment() == {} and exposure.summary().startswith("NOT loopback only: rendezvous store "
                                                                         "10.0.0.1:29400 (torch's c10d rendezvous)")
