"""Shared test helpers: run the real CLI in a subprocess and reap what it started."""

from __future__ import annotations

import functools
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest


def run_cli(*args: str, timeout: float = 240, cwd: str | Path | None = None,
            env: dict[str, str] | None = None, alone: bool = False) -> subprocess.CompletedProcess:
    """`python -m ddplab ARGS` as a user would run it (``env``: extra variables); output captured.

    ``alone``: in a PID namespace of its own where the machine allows one, so that it sees only its own processes.
    The suite runs two test files at once (Makefile), and some tests make orphans on purpose (torchrun's, a
    killed launcher's): a command that judges the whole machine, as `run`'s env stage does, would rightly
    warn about them."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="200", **(env or {}))
    prefix = PID_NAMESPACE if alone and _pid_namespaces_work() else []
    return subprocess.run([*prefix, sys.executable, "-m", "ddplab", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=env)


# --kill-child: the namespace's first process (and so all of it) ends with unshare, on a timeout too.
PID_NAMESPACE = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]


@functools.lru_cache(maxsize=1)
def _pid_namespaces_work() -> bool:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    return subprocess.run([*PID_NAMESPACE, "true"], capture_output=True).returncode == 0


# Secrets a user's environment commonly holds (issue 10 found these three in reports), and two
# variables ddplab does show whose values have a credential's shape. All fake.
PLANTED_SECRETS = {
    "RANKING_API_KEY": "rk-planted-ranking-key-0001",
    "DDPLAB_WEBHOOK_TOKEN": "planted-webhook-token-0002",
    "GLOO_TOKEN": "planted-gloo-token-0003",
    "NCCL_DEBUG_FILE": "/tmp/ddplab-debug.log?token=UGxhbnRlZFNlY3JldEJsb2IwMDA0",
    "NCCL_NET": "hf_PlantedHuggingFaceToken0005",
}
REDACTED_BY_VALUE = ("NCCL_DEBUG_FILE", "NCCL_NET")


def load_script(name: str):
    """A script of the repository's scripts/ folder, imported as a module (its functions tested without running
    it)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_json(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())


def processes_with_env(key: str, value: str) -> list[psutil.Process]:
    """Live processes whose initial environment carries key=value."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(key) == value and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return found


# A node's own bounds, as a platform team writes them per machine type, far from this host's speed: the built-in ones
# (the storm's 1000 us line for gloo on the host, busbw as a share of the copy ceiling) are the host's speed, and a
# machine shared with another test process crossed the storm's (1018.9 and 1156 us). For checks whose test is not
# about those numbers; the built-in bounds are tested with the degraded node and in tests/unit.
LOOSE_THRESHOLDS = ('[[machine]]\ndevice = "*"\n\n[[machine.latency]]\nquantile = "mean"\nwarning = 1000000.0\n\n'
                    '[[machine.busbw]]\nop = "*"\nwarning = 0.000001\n')


def loose_thresholds(directory: Path) -> str:
    """LOOSE_THRESHOLDS written into ``directory``; the path, for `ddplab check --thresholds`."""
    path = directory / "thresholds.toml"
    path.write_text(LOOSE_THRESHOLDS)
    return str(path)


def free_loopback_port() -> int:
    """A port free on 127.0.0.1 now (the kernel's pick), for a job the test starts to listen on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def connections(proc: psutil.Process, kind: str = "inet") -> list:
    """The process's sockets, by whichever name this psutil has (net_connections from psutil 6, connections
    before: pyproject.toml allows 5.9)."""
    return proc.net_connections(kind=kind) if hasattr(proc, "net_connections") else proc.connections(kind)


def survivors(items, alive, within_s: float) -> list:
    """The ``items`` still ``alive`` ``within_s`` seconds from now: as soon as none is, or at the deadline. The
    same verdict as sleeping ``within_s`` and looking once, without waiting out the sleep when they went at once."""
    deadline = time.monotonic() + within_s
    left = [i for i in items if alive(i)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [i for i in left if alive(i)]
    return left


@pytest.fixture(autouse=True)
def _reap_children():
    """Whatever a test started is gone when it ends, pass or fail."""
    yield
    me = psutil.Process()
    children = me.children(recursive=True)
    for child in children:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(children, timeout=5)


@pytest.fixture(autouse=True)
def _forget_secrets():
    """The secrets a test's command line taught this process (redaction.learn) are not withheld in the next test's
    files."""
    yield
    from ddplab.basics import redaction

    redaction.forget()


@pytest.fixture(scope="session")
def golden_run(tmp_path_factory):
    """``golden_run(name)``: (the command, its JSON report's path) of the golden command ``name``
    (tests/golden/commands.py), run once per session for every module that reads it: the golden key test, the torch
    engine's sweep in tests/integration/test_engines_cpu.py, the two-rank train in test_train_cpu.py, the ceiling
    and the storm in test_benchmarks_cpu.py, the host contention in test_steady_numbers_cpu.py."""
    from tests.golden.commands import COMMANDS

    done: dict[str, tuple[subprocess.CompletedProcess, Path]] = {}

    def run(name: str) -> tuple[subprocess.CompletedProcess, Path]:
        if name not in done:
            out = tmp_path_factory.mktemp(f"golden-{name}")
            done[name] = run_cli(*COMMANDS[name], "--json", str(out / f"{name}.json"), cwd=out), out / f"{name}.json"
        return done[name]

    return run


# Two test processes share the machine (Makefile: pytest -n 2). Each module is one unit of work, so that its
# module-scoped runs happen once; the modules that make orphans on purpose or end the machine's orphans
# (`clean --yes`) are one unit together: run side by side, one would end or count the other's orphans.
ORPHAN_MODULES = {f"tests/integration/{name}.py" for name in
                  ("test_clean", "test_drills_cpu", "test_launch_cpu", "test_launch_secrets", "test_launcher_death",
                   "test_torchrun_drill_ready", "test_check_cpu")}
# The modules that read golden_run's commands are one unit too: a session fixture is run once per test process,
# so in two processes the golden sweep, train, ceiling and contention ran twice (about 30 s of the 2 cores).
GOLDEN_MODULES = {"tests/golden/test_json_keys.py", *(f"tests/integration/{name}.py" for name in (
    "test_benchmarks_cpu", "test_engines_cpu", "test_steady_numbers_cpu", "test_train_cpu"))}


def _scope(nodeid: str) -> str:
    """The unit of work a test belongs to (pytest_xdist_make_scheduler)."""
    module = nodeid.split("::", 1)[0]
    if module in ORPHAN_MODULES or (module in _BESIDE_ORPHANS and not _pid_namespaces_work()):
        return "orphan-making modules"
    return "golden runs' readers" if module in GOLDEN_MODULES else module


# Where no PID namespace keeps `run_cli(alone=True)` apart, its modules wait for the orphan makers instead.
_BESIDE_ORPHANS = {"tests/integration/test_run_and_report.py"}


def _heavy_first(scope: str) -> int:
    """The order units are handed out in: the longest first, so that the run ends on small units in both test
    processes. In the order of the tests' count (xdist's default), the network-namespace modules, three to five
    tests of 15-50 s each, came last, and one process ran them for minutes while the other had finished."""
    if scope in ("orphan-making modules", "golden runs' readers"):
        return 0
    if scope.startswith("tests/integration/"):
        return 1 if "netns" in scope else 2
    return 3


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: _heavy_first(_scope(item.nodeid)))  # stable: each unit keeps its own order


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: only called when the tests run in several processes
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ModulesWithOrphansTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    config.option.loadscopereorder = False  # hand the units out in the collection's order (_heavy_first)
    return ModulesWithOrphansTogether(config, log)
