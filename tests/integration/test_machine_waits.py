"""A stop while elastic waits for the other machines of a job: torch's rendezvous and exit barrier wait inside
TCPStore calls, in C++, where no Python signal handler runs (supervision/machine_waits.py). Two launchers on one
machine stand for two machines; a socket that never answers stands for a machine that hangs."""

import os
import signal
import socket
import subprocess
import sys

import psutil
import pytest

from ddplab.supervision import outside_stacks
from tests.conftest import connections, free_loopback_port, load_json
from tests.stopped_runs import IDLE_RANKS, finish, processes_under, settle, start, wait_for

pytestmark = pytest.mark.slow


def _tcp_of(pid: int, port: int, status: str) -> bool:
    """Whether process ``pid`` has a TCP socket in ``status`` on ``port`` (its own, or the peer's)."""
    try:
        conns = connections(psutil.Process(pid), kind="tcp")
    except psutil.NoSuchProcess:
        return False
    return any(c.status == status and port in (c.laddr.port, c.raddr.port if c.raddr else None) for c in conns)


# Node 1 as torch's static rendezvous makes it (a TCPStore client of a store for 2), arriving once node 0's report is
# written: while node 0's interpreter shuts down.
LATE_NODE = """\
import datetime, os, sys, time
import torch.distributed as dist
report, port = sys.argv[1], int(sys.argv[2])
print("imported", flush=True)
deadline = time.monotonic() + 120  # never left behind by a test that failed before the report
while not os.path.exists(report) and time.monotonic() < deadline:
    time.sleep(0.005)
time.sleep(0.15)
try:
    dist.TCPStore("127.0.0.1", port, 2, False, datetime.timedelta(seconds=1))
except Exception:  # node 0 was gone already
    pass
"""


# How a launch waits for another machine: hosting torch's static store (node 0), or connected to a store that never
# answers (a machine that hangs) as node 1 of a static or a c10d rendezvous.
RENDEZVOUS_WAITS = {
    "static, hosting": (0, ["--master-addr", "127.0.0.1", "--master-port", "{port}"]),
    "static, joining": (1, ["--master-addr", "127.0.0.1", "--master-port", "{port}"]),
    "c10d, joining": (1, ["--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:{port}",
                          "--rdzv-conf", "read_timeout=600"]),  # torch's default, 60 s, is near the test's wait
}


@pytest.mark.parametrize("wait", sorted(RENDEZVOUS_WAITS))
def test_a_stop_while_a_rendezvous_waits_for_other_machines_is_seen_at_once(tmp_path, wait):
    """torch's rendezvous handlers wait inside TCPStore calls, in C++, where no Python signal handler runs: a stop
    was once seen only when that wait timed out (here 600 s). Node 0's node 1 comes only as node 0 leaves: its wait,
    given up in a helper thread, then returned into an interpreter shutting down, which aborted the process (134)."""
    node_rank, options = RENDEZVOUS_WAITS[wait]
    (tmp_path / "idle.py").write_text(IDLE_RANKS)
    port = free_loopback_port()
    out_dir = tmp_path / "job"
    silent_store = late_node = None
    if node_rank == 1:
        silent_store = socket.socket()
        silent_store.bind(("127.0.0.1", port))
        silent_store.listen()
    else:
        late_node = subprocess.Popen([sys.executable, "-c", LATE_NODE, str(out_dir / "report.json"), str(port)],
                                     stdout=subprocess.PIPE, text=True)
        assert late_node.stdout.readline().strip() == "imported"
    proc = start(["launch", "--nnodes", "2", "--node-rank", str(node_rank), *[o.format(port=port) for o in options],
                  "--nproc-per-node", "1", "--out", str(out_dir), "idle.py"], tmp_path)
    try:
        # waiting: node 0 listens as the store; node 1 is connected to it
        wait_for(lambda: _tcp_of(proc.pid, port, psutil.CONN_LISTEN if node_rank == 0 else psutil.CONN_ESTABLISHED),
                 proc)
        os.kill(proc.pid, signal.SIGTERM)
        out = finish(proc, tmp_path, timeout=30)  # not the rendezvous' 600 s
    finally:
        if silent_store:
            silent_store.close()
        if late_node:
            late_node.kill()
            late_node.wait()
        if proc.poll() is None:  # the stop was not seen: end it here, not at the rendezvous' timeout
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out[-3000:]
    results = load_json(out_dir / "report.json")["results"]
    assert results["outcome"] == "interrupted" and results["ranks"] == [], results
    assert "SIGTERM" in results["launcher_error"]
    assert "Traceback" not in out
    assert settle(lambda: processes_under(out_dir)) == []


RANK_SUM = """\
import os, pathlib, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
total = torch.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(total)
dist.destroy_process_group()
pathlib.Path(f"sum.{os.environ['RANK']}").write_text(
    " ".join([*(os.environ[k] for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")), str(total.item())]))
while os.environ["GROUP_RANK"] == "1" and not os.path.exists("release"):  # node 1's rank: until the test says
    time.sleep(0.05)
"""


def _in_the_exit_barrier(launcher: subprocess.Popen) -> bool:
    """Whether elastic's exit barrier is on one of the launcher's stacks, as py-spy reads them."""
    py_spy = outside_stacks.find()
    assert py_spy, "py-spy is in the test extras: pip install -e '.[test]'"
    dump = subprocess.run([py_spy, "dump", "--pid", str(launcher.pid)], capture_output=True, text=True, timeout=60)
    return "_exit_barrier" in dump.stdout


def test_two_launches_meet_and_a_stop_in_the_exit_barrier_is_seen_at_once(tmp_path):
    """Two launchers, nodes 0 and 1, meet through torch's static rendezvous (made and met in a helper thread): their
    ranks get the global ranks and the env:// contract torchrun gives. Node 0's rank ends first; its launcher then
    waits in elastic's exit barrier for node 1 (in C++; 300 s by default), where a stop is seen at once too."""
    (tmp_path / "sum.py").write_text(RANK_SUM)
    port = free_loopback_port()
    launches = []
    for node in (0, 1):
        log = open(tmp_path / f"node{node}.txt", "w")
        launches.append(subprocess.Popen(
            [sys.executable, "-m", "ddplab", "launch", "--nnodes", "2", "--node-rank", str(node), "--master-addr",
             "127.0.0.1", "--master-port", str(port), "--nproc-per-node", "1", "--out", str(tmp_path / f"node{node}"),
             "sum.py"], cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    node0, node1 = launches
    try:
        wait_for(lambda: (tmp_path / "sum.1").exists() and _in_the_exit_barrier(node0), node0, timeout=120)
        os.kill(node0.pid, signal.SIGTERM)
        node0.wait(timeout=30)  # not the exit barrier's 300 s
        (tmp_path / "release").touch()
        node1.wait(timeout=60)  # its barrier's store, hosted by node 0, is gone: elastic lets it go
    finally:
        for launch in launches:
            if launch.poll() is None:
                launch.kill()
                launch.wait()
    outputs = [(tmp_path / f"node{node}.txt").read_text() for node in (0, 1)]
    assert (node0.returncode, node1.returncode) == (130, 0), outputs
    seen = sorted((tmp_path / f"sum.{rank}").read_text() for rank in (0, 1))
    assert seen == [f"0 2 127.0.0.1 {port} 3.0", f"1 2 127.0.0.1 {port} 3.0"]
    assert load_json(tmp_path / "node0" / "report.json")["results"]["outcome"] == "interrupted"
    assert settle(lambda: processes_under(tmp_path)) == []
