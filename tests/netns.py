"""Several "machines" on this host for tests: network namespaces joined by a switch.

    with Machines(2) as machines:              # or the ``machines`` fixture factory below
        a, b = machines                        # a.address == "10.9.0.1", b.address == "10.9.0.2"
        proc = a.popen([sys.executable, "-m", "ddplab", ...])
        b.disconnect()                         # pull b's cable (a partition); b.connect() puts it back

Each machine is a network namespace with its own loopback and one interface (``eth0``) on the
10.9.0.0/24 network; the switch is one more namespace holding a bridge that every machine's
cable (a veth pair) plugs into. Nothing is added to the host's own namespace, and names carry a
random suffix, so test runs side by side never collide. Everything is torn down in ``close``,
after a failed test too: processes still running inside a machine are ended first (they were
started there by this test: that is the evidence), then the namespaces are deleted.

What these machines share with the host, as containers on one VM do (docs/background.md section 6):
the hostname (``vm`` here, resolving to 127.0.0.1), the filesystem, the pid namespace. A test
that needs a machine's identity uses its address, never its hostname.

Needs root and iproute2; otherwise every test using it is skipped with the reason.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from typing import Iterator

import pytest

SUBNET = "10.9.0"
PREFIX_LEN = 24
INTERFACE = "eth0"  # a machine's interface, inside its own namespace


class NamespacesUnavailable(Exception):
    """Network namespaces cannot be created here (not root, no iproute2, a sandbox that refuses)."""


def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise NamespacesUnavailable(f"`ip {' '.join(args)}` failed: {proc.stderr.strip() or proc.returncode}")


@dataclass
class Machine:
    index: int
    namespace: str
    address: str
    switch: str  # the switch's namespace
    port: str  # this machine's port on the switch
    started: list[subprocess.Popen] = field(default_factory=list)  # what popen started here

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` as it runs inside this machine."""
        return ["ip", "netns", "exec", self.namespace, *argv]

    def popen(self, argv: list[str], **kwargs) -> subprocess.Popen:
        """Start ``argv`` inside this machine (``ip netns exec`` execs it: the pid is the program's own)."""
        proc = subprocess.Popen(self.command(argv), **kwargs)
        self.started.append(proc)
        return proc

    def run(self, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        kwargs.setdefault("timeout", 60)
        return subprocess.run(self.command(argv), **kwargs)

    def pids(self) -> list[int]:
        """Processes running inside this machine now."""
        proc = subprocess.run(["ip", "netns", "pids", self.namespace], capture_output=True, text=True, timeout=30)
        return [int(p) for p in proc.stdout.split()]

    def left_running(self, tracker_s: float = 5.0) -> list[str]:
        """The processes inside this machine ("pid: command line"). A launcher's multiprocessing resource tracker
        exits on its own just after the launcher (at the end of its pipe), and a loaded machine once showed it
        there in that moment; a process caught exiting has no command line left. Those alone are given
        ``tracker_s`` to go; anything else is reported at once."""
        deadline = time.monotonic() + tracker_s
        while True:
            left = {pid: _cmdline(pid) for pid in self.pids()}
            left = {pid: line for pid, line in left.items() if line != GONE}
            going = [pid for pid, line in left.items() if "multiprocessing.resource_tracker" in line or line == NO_LINE]
            if not going or len(going) < len(left) or time.monotonic() >= deadline:
                return [f"{pid}: {line}" for pid, line in left.items()]
            time.sleep(0.1)

    def disconnect(self) -> None:
        """Pull this machine's cable: its switch port goes down, the machine itself sees carrier loss."""
        _ip("-n", self.switch, "link", "set", self.port, "down")

    def connect(self) -> None:
        _ip("-n", self.switch, "link", "set", self.port, "up")


class Machines:
    """``count`` machines on one switch; a context manager that always tears them down."""

    def __init__(self, count: int = 2):
        if not 2 <= count <= 250:
            raise ValueError(f"count {count}: 2 to 250 machines")
        self.count = count
        self.tag = f"ddpl{uuid.uuid4().hex[:8]}"
        self.switch = f"{self.tag}-sw"
        self.machines: list[Machine] = []
        self._namespaces: list[str] = []

    def __enter__(self) -> Machines:
        """Create the machines (once: entering again, as ``with group:`` after a probe, reuses them)."""
        if self.machines:
            return self
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __iter__(self):
        return iter(self.machines)

    def __getitem__(self, index: int) -> Machine:
        return self.machines[index]

    def __len__(self) -> int:
        return len(self.machines)

    def _create(self) -> None:
        if os.geteuid() != 0:
            raise NamespacesUnavailable("network namespaces need root")
        if shutil.which("ip") is None:
            raise NamespacesUnavailable("iproute2's `ip` is not installed")
        self._add_namespace(self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for i in range(self.count):
            machine = Machine(i, f"{self.tag}-m{i}", f"{SUBNET}.{i + 1}", self.switch, f"p{i}")
            self._add_namespace(machine.namespace)
            # Created straight into the two namespaces: no name is ever taken in the host's.
            _ip("link", "add", INTERFACE, "netns", machine.namespace, "type", "veth",
                "peer", "name", machine.port, "netns", self.switch)
            _ip("-n", self.switch, "link", "set", machine.port, "master", "br0")
            _ip("-n", self.switch, "link", "set", machine.port, "up")
            _ip("-n", machine.namespace, "addr", "add", f"{machine.address}/{PREFIX_LEN}", "dev", INTERFACE)
            _ip("-n", machine.namespace, "link", "set", INTERFACE, "up")
            _ip("-n", machine.namespace, "link", "set", "lo", "up")
            self.machines.append(machine)

    def _add_namespace(self, name: str) -> None:
        _ip("netns", "add", name)
        self._namespaces.append(name)

    def close(self) -> None:
        """End what still runs inside the machines, then delete every namespace this object made."""
        for machine in self.machines:
            # popen's own processes too: one started a moment ago may not have entered the namespace yet
            _end(sorted({*machine.pids(), *(p.pid for p in machine.started if p.poll() is None)}))
            for proc in machine.started:
                proc.poll()  # reap
        for name in reversed(self._namespaces):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
        self._namespaces.clear()


def _end(pids: list[int], grace_s: float = 3.0) -> None:
    """SIGTERM, then SIGKILL whatever is left: processes this test started inside its own machines."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.05)
        pids = [p for p in pids if _alive(p)]
        if not pids:
            return


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@functools.lru_cache(maxsize=1)
def namespaces_work() -> bool:
    """Whether this machine can make the test machines: two made and torn down, once per test process."""
    try:
        with Machines(2):
            return True
    except (NamespacesUnavailable, subprocess.SubprocessError, OSError):  # `ip` timing out on a loaded machine
        return False


@contextlib.contextmanager
def machines_or_skip(count: int = 2) -> Iterator[Machines]:
    """``Machines(count)``, or the test skipped with the reason where namespaces cannot be created."""
    group = Machines(count)
    try:
        group.__enter__()
    except NamespacesUnavailable as exc:
        pytest.skip(f"cannot create network namespaces here: {exc}")
    try:
        yield group
    finally:
        group.close()


@pytest.fixture
def machines():
    """A factory: ``machines(3)`` gives three machines, torn down when the test ends."""
    with contextlib.ExitStack() as stack:
        yield lambda count=2: stack.enter_context(machines_or_skip(count))


GONE = "(gone)"
NO_LINE = "(no command line)"  # a process exiting (or a zombie): the kernel has dropped its memory


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip() or NO_LINE
    except OSError:
        return GONE
