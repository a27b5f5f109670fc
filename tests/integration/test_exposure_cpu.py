"""Nothing exposed: a one-machine run listens on loopback only, and secrets stay out of reports."""

import ipaddress
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import PLANTED_SECRETS, REDACTED_BY_VALUE, connections, free_loopback_port, load_json, run_cli

ENV_JOB = Path(__file__).resolve().parent / "env_job.py"


def _listening(pids: set[int]) -> set[tuple[int, str, int]]:
    """(pid, address, port) of every listening TCP socket these processes hold."""
    found = set()
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            conns = connections(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        found |= {(pid, c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN}
    return found


def _is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


class _SocketWatcher(threading.Thread):
    """Samples, while the launcher lives, the listening sockets and the environment of it and its ranks."""

    def __init__(self, launcher: subprocess.Popen):
        super().__init__(daemon=True)
        self.launcher = launcher
        self.sockets: set[tuple[int, str, int]] = set()
        self.socket_env: dict[int, str | None] = {}  # child pid -> GLOO_SOCKET_IFNAME it started with

    def run(self):
        root = psutil.Process(self.launcher.pid)
        while self.launcher.poll() is None:
            try:
                children = root.children(recursive=True)
            except psutil.NoSuchProcess:
                return
            for child in children:
                try:
                    self.socket_env[child.pid] = child.environ().get("GLOO_SOCKET_IFNAME")
                except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                    continue
            self.sockets |= _listening({root.pid, *(c.pid for c in children)})
            time.sleep(0.05)


def _run_watched(argv: list[str], cwd, env: dict[str, str], timeout_s: float = 240):
    """`python -m ddplab ARGV`, its listening sockets and its children's environment sampled while it runs."""
    launcher = subprocess.Popen([sys.executable, "-m", "ddplab", *argv], cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    watcher = _SocketWatcher(launcher)
    watcher.start()
    try:
        stdout, stderr = launcher.communicate(timeout=timeout_s)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    watcher.join(timeout=10)
    return launcher, stdout, stderr, watcher


def _loopback_interface() -> str:
    return next(name for name, addrs in psutil.net_if_addrs().items() if any(a.address == "127.0.0.1" for a in addrs))


def _environ_without_socket_pins() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "GLOO_SOCKET_IFNAME"}


@pytest.mark.slow
def test_single_machine_train_listens_on_loopback_only(tmp_path):
    out = tmp_path / "train.json"
    launcher, _, stderr, watcher = _run_watched(["train", "--nproc", "2", "--steps", "10", "--run-dir",
                                                 str(tmp_path / "run"), "--json", str(out)],
                                                tmp_path, _environ_without_socket_pins())
    assert launcher.returncode == 0, stderr[-3000:]
    doc = load_json(out)
    assert doc["verdict"] == "pass"
    exposed = [s for s in watcher.sockets if not _is_loopback(s[1])]
    assert exposed == [], f"listening beyond loopback: {exposed}"

    listen = doc["results"]["listen"]
    assert listen["loopback_only"] is True and listen["why_not"] == []
    store_host, _, store_port = listen["store"].rpartition(":")
    assert store_host == "127.0.0.1"
    launcher_sockets = {(ip, port) for pid, ip, port in watcher.sockets if pid == launcher.pid}
    # one store, the one the report names: elastic's two every-interface stores are gone
    assert launcher_sockets == {("127.0.0.1", int(store_port))}
    # the ranks' collective sockets were pinned to the loopback interface, not left to the hostname
    loopback_interface = _loopback_interface()
    rank_pids = [r["pid"] for r in doc["results"]["ranks"]]
    assert [watcher.socket_env.get(pid) for pid in rank_pids] == [loopback_interface] * 2
    assert {pid for pid, _, _ in watcher.sockets} >= set(rank_pids)  # each rank's gloo listener was seen
    assert {p["variable"]: (p["value"], p["set_by"]) for p in listen["sockets"]} == \
        {"GLOO_SOCKET_IFNAME": (loopback_interface, "ddplab")}


# A one-machine job as torch 2.13 runs it by default (torchrun's --standalone: c10d on a free port), and as torch
# 2.11 did (a static rendezvous on --master-port): either way ddplab's loopback store takes the place of torch's.
LAUNCH_RENDEZVOUS = {"default": [], "static": ["--rdzv-backend", "static", "--master-port", "{port}"]}


@pytest.mark.slow
@pytest.mark.parametrize("rendezvous", sorted(LAUNCH_RENDEZVOUS))
def test_single_machine_launch_listens_on_loopback_only(tmp_path, rendezvous):
    """`ddplab launch` of a user's script that meets through env:// (init_process_group("gloo")): every socket of
    the launcher and its ranks listens on loopback, the ranks get the same env:// contract as from torchrun,
    and the report says where the job listened."""
    port = free_loopback_port()
    options = [a.format(port=port) for a in LAUNCH_RENDEZVOUS[rendezvous]]
    job = tmp_path / "job"
    launcher, stdout, stderr, watcher = _run_watched(
        ["launch", "--nproc-per-node", "2", *options, "--out", str(job), "--", str(ENV_JOB), str(tmp_path), "2"],
        tmp_path, _environ_without_socket_pins(), timeout_s=120)
    assert launcher.returncode == 0, stdout[-2000:] + stderr[-3000:]
    results = load_json(job / "report.json")["results"]
    exposed = sorted(s for s in watcher.sockets if not _is_loopback(s[1]))
    assert exposed == [], f"listening beyond loopback: {exposed}"

    listen = results["listen"]
    assert (listen["loopback_only"], listen["single_machine"], listen["why_not"]) == (True, True, [])
    assert listen["address"] == "127.0.0.1" and listen["store"] == f"127.0.0.1:{listen['port']}"
    if rendezvous == "static":
        assert listen["port"] == port  # the port the user asked for, kept (on loopback)
    assert {p["variable"]: (p["value"], p["set_by"]) for p in listen["sockets"]} == \
        {"GLOO_SOCKET_IFNAME": (_loopback_interface(), "ddplab")}
    assert f"listened: loopback only: rendezvous store 127.0.0.1:{listen['port']}" in stdout
    launcher_sockets = {(ip, p) for pid, ip, p in watcher.sockets if pid == launcher.pid}
    assert launcher_sockets == {("127.0.0.1", listen["port"])}  # one store, the one the report names
    rank_pids = {r["pid"] for r in results["ranks"]}
    assert {pid for pid, _, _ in watcher.sockets} >= rank_pids  # each rank's gloo listener was seen

    # torchrun's contract for env://: the store's address and port, reused by the ranks (rank 0 hosts no other)
    handed = [load_json(tmp_path / f"handed-{rank}.json") for rank in (0, 1)]
    assert [(h["RANK"], h["WORLD_SIZE"]) for h in handed] == [("0", "2"), ("1", "2")]
    assert {(h["MASTER_ADDR"], h["MASTER_PORT"], h["TORCHELASTIC_USE_AGENT_STORE"], h["GLOO_SOCKET_IFNAME"])
            for h in handed} == {("127.0.0.1", str(listen["port"]), "True", _loopback_interface())}
    assert all(h["sum"] == [32.0] * 4 for h in handed)  # five all_reduces of ones over two ranks: 2**5


@pytest.mark.slow
def test_a_socket_interface_the_user_set_is_kept_and_loopback_is_not_claimed(tmp_path):
    out = tmp_path / "train.json"
    proc = run_cli("train", "--nproc", "1", "--steps", "2", "--run-dir", str(tmp_path / "run"), "--json", str(out),
                   cwd=tmp_path, env={"GLOO_SOCKET_IFNAME": "ddplab-no-such-if0"})
    listen = load_json(out)["results"]["listen"]
    assert listen["loopback_only"] is False
    assert listen["sockets"] == [{"variable": "GLOO_SOCKET_IFNAME", "value": "ddplab-no-such-if0",
                                  "set_by": "user", "loopback": False}]
    assert "You set GLOO_SOCKET_IFNAME=ddplab-no-such-if0" in listen["why_not"][0]
    assert proc.returncode != 0  # gloo really used the user's (missing) interface: nothing overrode it


def test_env_keeps_secrets_out_and_says_where_a_run_listens(tmp_path):
    out = tmp_path / "env.json"
    proc = run_cli("env", "--json", str(out), env={**PLANTED_SECRETS, "TORCH_CPP_LOG_LEVEL": "ERROR"}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = out.read_text()
    for value in PLANTED_SECRETS.values():
        assert value not in text and value not in proc.stdout
    environ = load_json(out)["platform"]["environ"]
    assert not {"RANKING_API_KEY", "DDPLAB_WEBHOOK_TOKEN", "GLOO_TOKEN"} & set(environ)
    assert {k: environ[k] for k in REDACTED_BY_VALUE} == {k: "[redacted]" for k in REDACTED_BY_VALUE}
    assert environ["TORCH_CPP_LOG_LEVEL"] == "ERROR"  # an ordinary knob is still shown as it is
    assert "where a one-machine run listens: loopback only: rendezvous store 127.0.0.1" in proc.stdout
    assert load_json(out)["results"]["listen"]["loopback_only"] is True
