"""Run `python -m ddplab ARGS` and list every listening socket of the launcher and its children.

    python scripts/device/listening_sockets.py train --per-device --nproc 2 --steps 200

Prints each (role, pid, address:port) once, then the command's exit code; exits 1 when any
socket listened beyond loopback (docs/exposure.md), else with the command's own code.
"""

from __future__ import annotations

import ipaddress
import subprocess
import sys
import time

import psutil


def listening(pids):
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            conns = proc.net_connections(kind="inet") if hasattr(proc, "net_connections") else proc.connections("inet")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        for c in conns:
            if c.status == psutil.CONN_LISTEN:
                yield pid, c.laddr.ip, c.laddr.port


def is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])
    return (getattr(ip, "ipv4_mapped", None) or ip).is_loopback


def main(argv: list[str]) -> int:
    launcher = subprocess.Popen([sys.executable, "-m", "ddplab", *argv])
    root = psutil.Process(launcher.pid)
    seen: set[tuple[int, str, int]] = set()
    while launcher.poll() is None:
        try:
            pids = {root.pid, *(c.pid for c in root.children(recursive=True))}
        except psutil.NoSuchProcess:
            break
        seen |= set(listening(pids))
        time.sleep(0.05)
    exposed = [s for s in seen if not is_loopback(s[1])]
    for pid, ip, port in sorted(seen):
        role = "launcher" if pid == launcher.pid else "child"
        print(f"listening: {role} pid {pid} {ip}:{port}{'' if is_loopback(ip) else '  <- NOT loopback'}")
    print(f"command exit code {launcher.returncode}; {len(seen)} listening socket(s), {len(exposed)} beyond loopback")
    return 1 if exposed else launcher.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
