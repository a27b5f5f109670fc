"""Two machines for real: one launcher per network namespace, gloo, ranks meeting over the veth network.

Before issue 13 both launchers timed out: torch hosts the store only where the endpoint matches the
hostname, and in these namespaces the hostname resolves to 127.0.0.1 (docs/background.md section 6).
"""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.conftest import load_json
from tests.netns import machines  # noqa: F401 (a fixture)

pytestmark = pytest.mark.slow

PORT = 29400  # each test's machines are fresh namespaces: every port is free in them


def _train(machine, tmp_path, name: str, endpoint: str, *extra: str) -> subprocess.Popen:
    return machine.popen([sys.executable, "-m", "ddplab", "train", "--nnodes", "2", "--nproc", "2", "--steps", "3",
                          "--rdzv-endpoint", endpoint, "--run-dir", str(tmp_path / name),
                          "--json", str(tmp_path / f"{name}.json"), *extra],
                         cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


class _Listeners(threading.Thread):
    """Every listening TCP socket inside one machine, sampled while a process runs there."""

    def __init__(self, machine, proc: subprocess.Popen):
        super().__init__(daemon=True)
        self.machine, self.proc = machine, proc
        self.seen: set[str] = set()  # "address:port" as ss prints it

    def run(self):
        while self.proc.poll() is None:
            out = self.machine.run(["ss", "-ltnH"]).stdout
            self.seen |= {line.split()[3] for line in out.splitlines() if line.strip()}
            time.sleep(0.05)


def test_two_machines_form_one_job_and_the_store_listens_on_the_endpoint_address_only(machines, tmp_path):
    a, b = machines(2)
    endpoint = f"{a.address}:{PORT}"
    launchers = [_train(a, tmp_path, "a", endpoint), _train(b, tmp_path, "b", endpoint)]
    listeners = [_Listeners(machine, launcher) for machine, launcher in zip((a, b), launchers)]
    for watcher in listeners:
        watcher.start()
    outputs = [p.communicate(timeout=240)[0] for p in launchers]
    for watcher in listeners:
        watcher.join(timeout=10)

    assert [p.returncode for p in launchers] == [0, 0], "\n".join(o[-3000:] for o in outputs)
    docs = {name: load_json(tmp_path / f"{name}.json") for name in ("a", "b")}
    for name, doc in docs.items():
        r = doc["results"]
        assert doc["verdict"] == "pass" and r["world_size"] == 4, name
        assert r["params_identical"] and r["grad_matches_reference"] and r["local_grad_differs"], name
        assert r["listen"]["address"] == a.address, name  # every machine's ranks use the one store
        pins = {p["variable"]: (p["value"], p["set_by"]) for p in r["listen"]["sockets"]}
        assert pins == {"GLOO_SOCKET_IFNAME": ("eth0", "ddplab")}, name  # the veth, not loopback
    assert sorted(x["rank"] for x in docs["a"]["results"]["ranks"]) == [0, 1]
    assert sorted(x["rank"] for x in docs["b"]["results"]["ranks"]) == [2, 3]
    for doc in docs.values():  # and every rank of the job with its machine, in both reports (gathered by the ranks)
        assert [(x["rank"], x["machine"]) for x in doc["results"]["machines"]["ranks"]] == [
            (0, a.address), (1, a.address), (2, b.address), (3, b.address)]
    across = {name: doc["results"]["listen"]["across_machines"] for name, doc in docs.items()}
    assert (across["a"]["hosts_store"], across["b"]["hosts_store"]) == (True, False)
    assert (across["a"]["node_address"], across["b"]["node_address"]) == (a.address, b.address)
    for name in ("a", "b"):  # written before the ranks started: where a supervisor finds the job's store
        written = load_json(tmp_path / name / "listen.json")
        assert (written["address"], written["port"]) == (a.address, PORT), name

    # Nothing listened on every interface on either machine: the store on 10.9.0.1 only, no second
    # store on group rank 0's machine, gloo's listeners on each machine's pinned veth address.
    assert f"{a.address}:{PORT}" in listeners[0].seen
    for machine, watcher in zip((a, b), listeners):
        assert watcher.seen, machine.address  # the sampling saw the run
        addresses = {s.rpartition(":")[0] for s in watcher.seen}
        assert addresses <= {machine.address, "127.0.0.1"}, (machine.address, watcher.seen)
    assert a.left_running() == [] and b.left_running() == []  # nothing left running on either machine


def test_a_wrong_endpoint_is_exit_3_naming_it_the_addresses_tried_and_the_port(machines, tmp_path):
    _, b = machines(2)
    nobody = "10.9.0.77"  # on the network, but no machine has it
    start = time.monotonic()
    proc = _train(b, tmp_path, "b", f"{nobody}:{PORT}")
    out = proc.communicate(timeout=120)[0]
    elapsed = time.monotonic() - start
    assert proc.returncode == 3, out[-3000:]
    assert elapsed < 60, elapsed  # the launcher's join timeout is 120 s: it did not wait for it (start-up included)
    assert "error: rdzv-endpoint-unreachable" in out
    assert f"nothing answers at the rendezvous endpoint {nobody}:{PORT} from this machine through eth0 " \
           f"({b.address})" in out
    assert f"tried {nobody}:{PORT}: no machine answers at that address (host unreachable)" in out
    assert f"open TCP port {PORT}" in out
    assert b.left_running() == []


def test_ctrl_c_while_waiting_for_the_store_stops_at_once_with_an_interrupted_report(machines, tmp_path):
    a, b = machines(2)  # a is there, but nobody listens on it: b keeps waiting for the store
    proc = _train(b, tmp_path, "b", f"{a.address}:{PORT}")
    deadline = time.monotonic() + 60
    while not _refused_a_connection(a) and time.monotonic() < deadline:  # b's first try: now inside the wait
        time.sleep(0.1)
    assert proc.poll() is None
    stopped_at = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out = proc.communicate(timeout=60)[0]
    assert time.monotonic() - stopped_at < 10, out[-2000:]  # not the 120 s the wait may take
    assert proc.returncode == 130, out[-3000:]
    doc = load_json(tmp_path / "b.json")
    assert doc["results"]["interrupted"] is True
    assert doc["results"]["launcher_error"] == f"interrupted: SIGINT while waiting for the store at {a.address}:{PORT}"
    assert doc["results"]["listen"]["across_machines"]["hosts_store"] is False
    assert b.left_running() == []


def _refused_a_connection(machine) -> bool:
    """Whether ``machine`` has answered a TCP connection with a reset (nothing listens on its port): where nothing
    else runs, the first of these is a launcher's first try to reach the store, made only inside its wait for it."""
    snmp = machine.run(["cat", "/proc/net/snmp"]).stdout.splitlines()  # the counters of the machine's namespace
    names, values = (line.split()[1:] for line in snmp if line.startswith("Tcp:"))
    return int(dict(zip(names, values))["OutRsts"]) > 0


def _srun_environment(node: int) -> dict[str, str]:
    """What srun sets for one task per node on a 2-node step whose nodes are the namespaces' addresses."""
    return {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_NNODES": "2", "SLURM_STEP_NUM_NODES": "2",
            "SLURM_NTASKS": "2", "SLURM_STEP_NUM_TASKS": "2", "SLURM_TASKS_PER_NODE": "1(x2)",
            "SLURM_STEP_TASKS_PER_NODE": "1(x2)", "SLURM_JOB_NODELIST": "10.9.0.[1-2]",
            "SLURM_STEP_NODELIST": "10.9.0.[1-2]", "SLURM_NODEID": str(node), "SLURM_PROCID": str(node),
            "SLURM_LOCALID": "0"}


def test_under_srun_the_same_2x2_train_needs_no_nodes_or_endpoint(machines, tmp_path):
    a, b = machines(2)
    launchers = []
    for node, (machine, name) in enumerate(((a, "a"), (b, "b"))):
        env = dict(os.environ, **_srun_environment(node))
        launchers.append(machine.popen([sys.executable, "-m", "ddplab", "train", "--nproc", "2", "--steps", "3",
                                        "--run-dir", str(tmp_path / name), "--json", str(tmp_path / f"{name}.json")],
                                       cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True))
    outputs = [p.communicate(timeout=240)[0] for p in launchers]
    assert [p.returncode for p in launchers] == [0, 0], "\n".join(o[-3000:] for o in outputs)
    assert "--rdzv-endpoint 10.9.0.1:29400 (the first node of SLURM_STEP_NODELIST=10.9.0.[1-2])" in outputs[0]
    docs = {name: load_json(tmp_path / f"{name}.json") for name in ("a", "b")}
    for name, doc in docs.items():
        launch = doc["config"]["launch"]
        assert (launch["nnodes"], launch["rdzv_endpoint"]) == (2, "10.9.0.1:29400"), name  # from SLURM_*
        r = doc["results"]
        assert doc["verdict"] == "pass" and r["world_size"] == 4 and r["params_identical"], name
    # node 0 hosts the store (SLURM_NODEID=0), node 1 never does
    assert docs["a"]["config"]["launch"]["rdzv_host"] == "yes" and docs["b"]["config"]["launch"]["rdzv_host"] == "no"
    assert docs["a"]["results"]["listen"]["across_machines"]["hosts_store"] is True
    assert [x["rank"] for x in docs["b"]["results"]["ranks"]] == [2, 3]
    assert {x["address"] for x in docs["b"]["results"]["ranks"]} == {b.address}  # each rank's machine
    assert a.left_running() == [] and b.left_running() == []
