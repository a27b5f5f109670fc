"""Arm -> inject -> observe -> verdict, shared by every drill; names no particular fault.

A drill records what was injected and when, which mechanism detected it first and how
long that took (``detect_s``), the culprit ranks ddplab names and the rank torchrun
would blame, an excerpt of the real error text, processes left behind (must be none),
device memory before and after (back to baseline on NVIDIA within 5 s), and a verdict.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import psutil

from .. import interrupts
from ..config import LaunchOptions
from ..launch import RUN_ID_ENV
from ..procs import TORCHRUN_MARKER

MEMORY_SLACK_BYTES = 64 << 20  # device-wide "used" memory moves by a few MiB on its own
MEMORY_WAIT_S = 5.0
LEAK_WAIT_S = 3.0

# The first words of a rank's error, mapped to the mechanism that raised it.
MECHANISMS = (
    (re.compile(r"Watchdog caught collective operation timeout|SIGABRT", re.I), "watchdog abort"),
    (re.compile(r"DistStoreError|wait timeout after|waiting for clients|client socket has timed out", re.I),
     "store timeout"),
    (re.compile(r"Timed out waiting .* for (recv|send)|operation to complete", re.I), "collective timeout (gloo)"),
    (re.compile(r"DistBackendError|ncclSystemError|ncclRemoteError|Blocking wait", re.I), "blocking-wait exception"),
    (re.compile(r"out of memory|OutOfMemoryError|can't allocate memory|MemoryError", re.I), "out-of-memory error"),
    (re.compile(r"Connection closed by peer|Connection reset|Broken pipe", re.I), "peer connection lost"),
)


@dataclass(frozen=True)
class DrillOptions:
    nproc: int = 2
    backend: str = "auto"
    device: str = "auto"
    placement: str = "auto"
    timeout_s: float = 10.0
    victim: int = 1
    launcher: str = "ddplab"  # kill_launcher only: ddplab or torchrun
    run_dir: str | None = None

    def launch(self, **overrides) -> LaunchOptions:
        base = LaunchOptions(nproc=self.nproc, backend=self.backend, device=self.device, placement=self.placement,
                             timeout_s=self.timeout_s, hang_timeout_s=self.timeout_s, run_dir=self.run_dir)
        return replace(base, **overrides)


def session_dir(opts: DrillOptions, name: str) -> str | None:
    """Each launch of a drill gets a run directory of its own inside the drill's (stall and
    straggler launch twice), because one directory holds one run (launch.RunDir)."""
    return str(Path(opts.run_dir) / name) if opts.run_dir else None


def classify(text: str) -> str | None:
    for pattern, name in MECHANISMS:
        if pattern.search(text or ""):
            return name
    return None


def excerpt(text: str, limit: int = 600) -> str:
    """The lines of an error that say what happened, not the traceback frames."""
    lines = [ln for ln in (text or "").splitlines() if ln.strip() and not ln.startswith("  File ")
             and not ln.strip().startswith("^")]
    return "\n".join(lines[-8:])[-limit:]


def device_used_bytes(monitor) -> int | None:
    sample = monitor.sample()
    return sum(sample.device_used_bytes.values()) if sample.device_used_bytes else None


def wait_memory_back(monitor, baseline: int | None) -> tuple[int | None, float | None]:
    """(bytes used after, seconds until back within slack of the baseline; None if never)."""
    if baseline is None:
        return None, None
    t0 = time.monotonic()
    used = device_used_bytes(monitor)
    while used is not None and used > baseline + MEMORY_SLACK_BYTES and time.monotonic() - t0 < MEMORY_WAIT_S:
        time.sleep(0.1)
        used = device_used_bytes(monitor)
    back = used is not None and used <= baseline + MEMORY_SLACK_BYTES
    return used, (round(time.monotonic() - t0, 2) if back else None)


def leaked(run_id: str, pids: list[int]) -> list[int]:
    """Processes of this run still alive LEAK_WAIT_S after the run ended (zombies excluded)."""
    deadline = time.monotonic() + LEAK_WAIT_S
    while True:
        alive = sorted({p for p in pids if _alive(p)} | set(_run_processes(run_id)))
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.2)


def _run_processes(run_id: str) -> list[int]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid == os.getpid() or proc.environ().get(RUN_ID_ENV) != run_id or \
                    proc.status() == psutil.STATUS_ZOMBIE:
                continue
            # multiprocessing's resource tracker is the launcher's own helper, started during the
            # first launch and kept for the launcher's life; it exits with the launcher.
            if proc.ppid() == os.getpid() and "multiprocessing.resource_tracker" in " ".join(proc.cmdline()):
                continue
            found.append(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def first_detection(session, injected_at: float | None, victim: int) -> dict:
    """The earliest of: ddplab's supervisor, a rank's own error, the launcher tearing down."""
    from .. import status as status_mod

    candidates = []
    if session.hang:
        candidates.append((session.hang["detected_at"], "ddplab supervisor", session.hang["reason"]))
    states = status_mod.read_all(session.run.path)
    for rank, state in states.items():
        if state.get("failed_at") and rank != victim:
            candidates.append((state["failed_at"], classify(state.get("error", "")) or "rank exception",
                               state.get("error", "")))
    for rank, failure in session.outcome.failures.items():
        if failure.signal and not session.hang:
            candidates.append((session.ended_at, "launcher teardown", f"rank {rank} died by {failure.signal}"))
    victim_state = states.get(victim, {})
    if victim_state.get("failed_at"):
        candidates.append((victim_state["failed_at"], classify(victim_state.get("error", "")) or "rank exception",
                           victim_state.get("error", "")))
    if not candidates:
        return {"detected_by": None, "detect_s": None, "error_excerpt": ""}
    when, how, text = min(candidates, key=lambda c: c[0])
    detect_s = round(max(0.0, when - injected_at), 2) if injected_at is not None else None
    return {"detected_by": how, "detect_s": detect_s, "error_excerpt": excerpt(text)}


def ddplab_culprits(session, states: dict[int, dict]) -> tuple[list[int], str]:
    """Who ddplab blames: the supervisor's verdict, a rank killed from outside, or status evidence."""
    from .. import status as status_mod

    if session.hang:
        return session.hang["culprit_ranks"], session.hang["reason"]
    killed = sorted(r for r, f in session.outcome.failures.items() if f.signal == "SIGKILL")
    if killed:
        return killed, "died by SIGKILL while the others were healthy"
    oom = sorted(r for r, s in states.items() if classify(s.get("error", "")) == "out-of-memory error")
    if oom:
        return oom, "ran out of memory"
    snapshot = {r: {**s, "phase": s.get("phase") if s.get("phase") != "failed" else "in-collective",
                    "heartbeat": time.time()} for r, s in states.items()}
    return status_mod.name_culprits(snapshot, len(session.placement.device_indices), time.time(), stale_s=1e9)


def injected_time(states: dict[int, dict], victim: int) -> float | None:
    """When the victim rank says it injected its fault; None when it never did."""
    return states.get(victim, {}).get("injected_at")


def child_launcher(argv: list[str], env: dict | None = None) -> subprocess.Popen:
    """A separate ddplab (or torchrun) process, so the drill can kill it like a user would.

    It leads a new session, hence its own process group, which its ranks join: a terminal's
    Ctrl+C meant for this drill does not reach it, and ``end_child_launcher`` can end all of it.
    """
    return subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {})}, start_new_session=True)


def end_child_launcher(child: subprocess.Popen) -> None:
    """End a child launcher with everything in its process group (its ranks), then reap it.

    Reaping matters: an unreaped launcher is a zombie whose pid still answers kill(pid, 0), so a
    rank that armed its parent-death guard after the launcher died took it for alive and ran on.
    """
    if child.returncode is None:  # not reaped yet: its pid, the group's id, cannot have been reused
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    child.wait()


def end_processes(pids: list[int]) -> None:
    """SIGKILL processes found to belong to a run (leaked ranks) and wait for them: reported, not left."""
    procs = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            proc.kill()
            procs.append(proc)
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(procs, timeout=5)


def wait_for_pids(run_dir: Path, count: int, timeout_s: float = 120.0) -> list[int]:
    """The ranks' pids once every rank is running; [] on timeout or when a stop was requested."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not interrupts.requested():
        pids = _pids_written(run_dir)
        if len(pids) >= count and _all_running(run_dir, count):
            return pids
        time.sleep(0.2)
    return []


def _pids_written(run_dir: Path) -> list[int]:
    pids = []
    for f in (run_dir / "pids").glob("[0-9]*"):  # not the writers' hidden temporary files
        try:
            pids.append(int(f.read_text()))
        except (ValueError, OSError):
            continue
    return pids


def _all_running(run_dir: Path, count: int) -> bool:
    """Every rank past init; ranks that count collectives have finished a few."""
    from .. import status as status_mod

    states = status_mod.read_all(run_dir)
    for r in range(count):
        s = states.get(r, {})
        if s.get("phase") not in ("running", "in-collective") or (0 < s.get("seq", 0) and s.get("done", 0) < 3):
            return False
    return True


def run_inprocess(name: str, opts: DrillOptions, fault: str, console=None, settings: dict | None = None,
                  controller_factory=None, env: dict | None = None, **launch_overrides) -> dict:
    """Run the drill workload under ddplab's launcher and supervisor; measure what happened."""
    from .. import session
    from .. import status as status_mod
    from ..launch import _environ
    from ..platform import open_monitor

    lopts = opts.launch(**{"run_dir": session_dir(opts, name), **launch_overrides})
    platform, placement = session.prepare(lopts)
    monitor = open_monitor(platform.spec)
    before = device_used_bytes(monitor)
    workload = {"fault": fault, "victim": opts.victim, "inject_at": 5, "steps": 100_000, "numel": 1024,
                "interval_s": 0.01, "late_s": opts.timeout_s + 60, "stall_s": 3 * opts.timeout_s + 60,
                **(settings or {})}
    injected: dict = {}
    with _environ(env or {}):
        s = session.run_workload("drill", workload, lopts, f"drill-{name}", console, live=False,
                                 prepared=(platform, placement),
                                 controller=controller_factory(injected, opts) if controller_factory else None)
    states = status_mod.read_all(s.run.path)
    # Only a fault that really went in has a time. A fallback (the start time) once let ranks that
    # crashed before any fault pass as a detection of it, and judge() requires the time.
    inject_at = injected.get("at") or injected_time(states, opts.victim)
    culprits, why = ddplab_culprits(s, states)
    leaks = leaked(s.run.run_id, list(s.run.rank_pids().values()))
    after, back_s = wait_memory_back(monitor, before)
    monitor.close()
    return {
        "drill": name,
        "injected": {"what": injected.get("what") or states.get(opts.victim, {}).get("injected"),
                     "rank": opts.victim, "at": inject_at},
        **first_detection(s, inject_at, opts.victim),
        "culprit_ranks": culprits,
        "culprit_reason": why,
        "torchrun_root_cause_rank": s.outcome.torchrun_root_cause_rank,
        "leaked_pids": leaks,
        "device_mem_before_bytes": before,
        "device_mem_after_bytes": after,
        "memory_back_s": back_s,
        "session": s.common_results(),
        "latencies": {r: v.get("latencies_us") for r, v in s.outcome.return_values.items()},
        "interrupted": s.outcome.interrupted or bool(interrupts.requested()),
    }


def fault_injected(outcome: dict) -> bool:
    """The drill's fault really went in: its injection has a time."""
    return (outcome.get("injected") or {}).get("at") is not None


def judge(outcome: dict, victim: int, timeout_s: float, memory_measured: bool) -> str:
    """pass: the fault went in, was detected within timeout + 5 s, the victim named, nothing
    leaked, memory back."""
    ok = (fault_injected(outcome)
          and outcome["detected_by"] is not None and outcome["detect_s"] is not None
          and outcome["detect_s"] <= timeout_s + 5
          and victim in outcome["culprit_ranks"]
          and not outcome["leaked_pids"]
          and (not memory_measured or outcome["memory_back_s"] is not None))
    return "pass" if ok else "fail"


def kill_when_running(sig: int, what: str):
    """A controller that sends ``sig`` to the victim rank once every rank has done a few collectives."""
    def factory(injected: dict, opts: DrillOptions):
        def control(run):
            pids = wait_for_pids(run.path, opts.nproc)
            victim_pid = run.rank_pids().get(opts.victim)
            if not pids or victim_pid is None:
                return
            sent_at = time.time()
            try:
                os.kill(victim_pid, sig)
            except ProcessLookupError:
                return  # the rank was already gone: nothing was injected
            injected.update(at=sent_at, what=what)
        return control
    return factory


def signal_child_launcher(name: str, opts: DrillOptions, sig: int, console=None) -> dict:
    """Start `ddplab train` as a separate launcher, send it ``sig`` mid-run, watch its ranks go."""
    from ..launch import RunDir
    from ..platform import detect, open_monitor

    platform = detect(opts.device, with_memory=False)
    monitor = open_monitor(platform.spec)
    before = device_used_bytes(monitor)
    run = RunDir.create(session_dir(opts, name), f"drill-{name}")
    child_dir, report = run.path / "launcher", run.path / "launcher-report.json"
    placement = {"shared": ["--share-device"], "per-device": ["--per-device"],
                 "spread": ["--spread"]}.get(opts.placement, [])
    child = child_launcher(["-m", "ddplab", "train", "--nproc", str(opts.nproc), "--steps", "1000000",
                            "--backend", opts.backend, "--device", opts.device, "--timeout", str(opts.timeout_s),
                            "--run-dir", str(child_dir), "--json", str(report), *placement])
    pids, run_id, injected_at, gone_at, child_exit = [], None, None, None, None
    try:
        pids = wait_for_pids(child_dir, opts.nproc)
        run_id = _run_id_of(pids)
        if pids and not interrupts.requested():
            injected_at = time.time()
            os.kill(child.pid, sig)
            gone_at = _wait_gone(pids, opts.timeout_s + 10)
            child_exit = _wait_exit(child, timeout_s=60)
    finally:
        if child_exit is None:  # never signalled, stuck, or this drill is being stopped: end it and its ranks
            end_child_launcher(child)
    leaks = leaked(run_id, pids) if run_id else [p for p in pids if _alive(p)]
    end_processes(leaks)
    log = child.stdout.read() if child.stdout else ""  # after the leaks end: they may hold the pipe open
    after, back_s = wait_memory_back(monitor, before)
    monitor.close()
    return {
        "drill": name,
        "injected": {"what": f"{signal.Signals(sig).name} to the launcher (pid {child.pid})", "rank": "launcher",
                     "at": injected_at},
        "detected_by": ("parent-death guard in every rank" if sig == signal.SIGKILL else "launcher teardown")
        if gone_at else None,
        "detect_s": round(gone_at - injected_at, 2) if gone_at else None,
        "error_excerpt": excerpt(log),
        "culprit_ranks": [],
        "culprit_reason": "the launcher itself was the victim",
        "torchrun_root_cause_rank": None,
        "launcher_exit_code": child_exit,
        "report_written": report.exists(),
        "rank_pids": pids,
        "leaked_pids": leaks,
        "device_mem_before_bytes": before,
        "device_mem_after_bytes": after,
        "memory_back_s": back_s,
        "run_dir": str(run.path),
        "run_id": run_id,
        "interrupted": bool(interrupts.requested()),
    }


def torchrun_orphans(opts: DrillOptions, console=None) -> dict:
    """Plain torchrun, agent SIGKILLed: its workers become orphans; then `ddplab clean --yes`."""
    from .. import session
    from ..launch import RunDir
    from ..platform import open_monitor

    platform, placement = session.prepare(opts.launch())
    monitor = open_monitor(platform.spec)
    before = device_used_bytes(monitor)
    run = RunDir.create(session_dir(opts, "kill_launcher-torchrun"), "drill-kill_launcher-torchrun")
    shared = "shared" if placement.shared_device else "per-device"
    workers: list[int] = []
    ready = run.path / "ready"
    ready.mkdir(exist_ok=True)
    injected_at, orphans, survivors, clean, run_id = None, [], [], None, None
    agent = child_launcher(["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(opts.nproc),
                            "-m", "ddplab.drills.torchrun_victim", "--backend", placement.backend,
                            "--device-type", placement.device_type, "--placement", shared, "--ready-dir", str(ready)])
    try:
        workers = _torchrun_workers(agent.pid, opts.nproc, monitor, ready)
        run_id = _run_id_of(workers, TORCHRUN_MARKER)  # read while they live: `ddplab run` counts this run's
        if not interrupts.requested():
            injected_at = time.time()
            os.kill(agent.pid, signal.SIGKILL)
            agent.wait(timeout=10)
            time.sleep(LEAK_WAIT_S)
            orphans = [p for p in workers if _alive(p)]
            clean = subprocess.run([sys.executable, "-m", "ddplab", "clean", "--yes", "--json",
                                    str(run.path / "clean.json")], capture_output=True, text=True, timeout=120)
            survivors = [p for p in workers if _alive(p)]
    finally:
        # torchrun's workers lead sessions of their own: ending the agent's group misses them, so
        # find them as the agent's descendants first (this drill started the agent).
        strays = _descendants(agent) if agent.returncode is None else []
        end_child_launcher(agent)
        for proc in _torchrun_leftovers(workers) + strays:  # whatever the drill itself failed to clean
            _kill_quietly(proc)
    after, back_s = wait_memory_back(monitor, before)
    monitor.close()
    return {
        "drill": "kill_launcher",
        "launcher": "torchrun",
        "injected": {"what": f"SIGKILL to the torchrun agent (pid {agent.pid})", "rank": "launcher",
                     "at": injected_at},
        "detected_by": None,
        "detect_s": None,
        "error_excerpt": "",
        "culprit_ranks": [],
        "culprit_reason": "the launcher itself was the victim",
        "torchrun_root_cause_rank": None,
        "worker_pids": workers,
        "orphans_after_kill": orphans,
        "clean_exit_code": clean.returncode if clean else None,
        "clean_output": clean.stdout[-1500:] if clean else "",
        "cleaned": bool(orphans) and not survivors,
        "leaked_pids": survivors,
        "device_mem_before_bytes": before,
        "device_mem_after_bytes": after,
        "memory_back_s": back_s,
        "run_dir": str(run.path),
        "run_id": run_id,
        "interrupted": bool(interrupts.requested()),
    }


def _descendants(child: subprocess.Popen) -> list[psutil.Process]:
    try:
        return psutil.Process(child.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _kill_quietly(proc: psutil.Process) -> None:
    try:
        proc.kill()  # psutil checks the process is still the one it found (pid reuse)
    except psutil.NoSuchProcess:
        pass


def _torchrun_workers(agent_pid: int, count: int, monitor, ready: Path, timeout_s: float = 120) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not interrupts.requested():
        try:
            kids = psutil.Process(agent_pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        workers = []
        for k in kids:
            try:
                if "TORCHELASTIC_RUN_ID" in k.environ() and (Path(f"/proc/{k.pid}/cmdline").read_text()
                                                             .find("torchrun_victim") >= 0):
                    workers.append(k.pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
                continue
        if len(workers) >= count and len(list(ready.glob("*"))) >= count:  # each wrote it after init
            return sorted(workers)
        time.sleep(0.3)
    return []


def _torchrun_leftovers(pids: list[int]) -> list[psutil.Process]:
    out = []
    for p in pids:
        try:
            proc = psutil.Process(p)
            if proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except psutil.NoSuchProcess:
            continue
    return out


def _run_id_of(pids: list[int], key: str = RUN_ID_ENV) -> str | None:
    for p in pids:
        try:
            return psutil.Process(p).environ().get(key)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return None


def _wait_gone(pids: list[int], timeout_s: float) -> float | None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not interrupts.requested():
        if pids and not any(_alive(p) for p in pids):
            return time.time()
        time.sleep(0.05)
    return None


def _wait_exit(child: subprocess.Popen, timeout_s: float) -> int | None:
    """The child's exit code once it exits (reaped); None after ``timeout_s`` or on a stop request."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not interrupts.requested():
        if child.poll() is not None:
            return child.returncode
        time.sleep(0.05)
    return child.poll()
