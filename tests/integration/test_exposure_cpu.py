"""Nothing exposed: a one-machine run listens on loopback only, and secrets stay out of reports."""

import ipaddress
import os
import subprocess
import sys
import threading
import time

import psutil
import pytest

from tests.conftest import PLANTED_SECRETS, REDACTED_BY_VALUE, load_json, run_cli


def _listening(pids: set[int]) -> set[tuple[int, str, int]]:
    """(pid, address, port) of every listening TCP socket these processes hold."""
    found = set()
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            conns = proc.net_connections(kind="inet") if hasattr(proc, "net_connections") else proc.connections("inet")
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


@pytest.mark.slow
def test_single_machine_train_listens_on_loopback_only(tmp_path):
    out = tmp_path / "train.json"
    env = {k: v for k, v in os.environ.items() if k != "GLOO_SOCKET_IFNAME"}
    launcher = subprocess.Popen([sys.executable, "-m", "ddplab", "train", "--nproc", "2", "--steps", "10",
                                 "--run-dir", str(tmp_path / "run"), "--json", str(out)],
                                cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    watcher = _SocketWatcher(launcher)
    watcher.start()
    try:
        _, stderr = launcher.communicate(timeout=240)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    watcher.join(timeout=10)
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
    loopback_interface = next(name for name, addrs in psutil.net_if_addrs().items()
                              if any(a.address == "127.0.0.1" for a in addrs))
    rank_pids = [r["pid"] for r in doc["results"]["ranks"]]
    assert [watcher.socket_env.get(pid) for pid in rank_pids] == [loopback_interface] * 2
    assert {pid for pid, _, _ in watcher.sockets} >= set(rank_pids)  # each rank's gloo listener was seen
    assert {p["variable"]: (p["value"], p["set_by"]) for p in listen["sockets"]} == \
        {"GLOO_SOCKET_IFNAME": (loopback_interface, "ddplab")}


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
