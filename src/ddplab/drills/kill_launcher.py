"""kill_launcher: SIGKILL the launcher, which can catch nothing.

--launcher ddplab (default): every rank's parent-death guard fires; no rank survives.
--launcher torchrun: plain torchrun, whose workers run on with parent 1, holding device memory; the drill then
proves `ddplab clean` finds exactly those orphans, ends them, and the memory comes back.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from ..basics import interrupts
from ..supervision import proc_facts, reaping
from ..basics.proc_stat import alive
from ..records.drill import DrillOutcome, Injection, TorchrunDetails
from ..basics.rundir import RunDir
from . import child_launcher, runner

SUMMARY = "SIGKILL the launcher (ddplab's, or plain torchrun's for comparison)"
EXPECT = ("ddplab: no rank survives 3 s later. torchrun: orphans remain, and ddplab clean removes exactly "
          "them and the memory comes back")
WORKER_MODULE = "ddplab.drills.torchrun_victim"
CLEAN_TIMEOUT_S = 120


def run(ctx: runner.DrillContext) -> DrillOutcome:
    if ctx.config.launcher == "torchrun":
        out = torchrun_orphans(ctx)
        return runner.judged(out, [
            (bool(out.details.orphans_after_kill), "torchrun left no orphans to compare with"),
            (out.details.cleaned, "ddplab clean did not end the orphans"), runner.nothing_left(out.leaked_pids),
            runner.memory_back(out)])
    out = child_launcher.signal_train(ctx, signal.SIGKILL, "parent-death guard in every rank")
    return runner.judged(out, [runner.went_in(out), (out.detect_s is not None, "no rank was seen to go"),
                               runner.nothing_left(out.leaked_pids)])


def torchrun_orphans(ctx: runner.DrillContext) -> DrillOutcome:
    """Plain torchrun, agent SIGKILLed: its workers become orphans; then `ddplab clean --yes`."""
    run = RunDir.create(ctx.run_dir(f"{ctx.name}-torchrun"), f"drill-{ctx.name}-torchrun")
    placement = ctx.placement
    nproc = placement.nproc
    ready = run.child("ready")
    ready.mkdir(exist_ok=True)
    workers: list[int] = []
    injected_at, orphans, survivors, clean, run_id = None, [], [], None, None
    with runner.DeviceMemory(ctx.platform) as memory:
        agent = child_launcher.start([
            "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc), "-m", WORKER_MODULE,
            "--backend", placement.backend, "--device-type", placement.device_type,
            "--placement", "shared" if placement.shared_device else "per-device", "--ready-dir", str(ready)])
        try:
            workers = wait_for_torchrun_workers(agent.pid, nproc, ready)
            run_id = _torchrun_run_id(workers)  # read while they live: `ddplab run` counts this run's leftovers
            if not interrupts.requested():
                injected_at = time.time()
                os.kill(agent.pid, signal.SIGKILL)
                agent.wait(timeout=10)
                time.sleep(reaping.LEAK_WAIT_S)
                orphans = [p for p in workers if alive(p)]
                clean = subprocess.run([sys.executable, "-m", "ddplab", "clean", "--yes", "--json",
                                        str(run.child("clean.json"))], capture_output=True, text=True,
                                       timeout=CLEAN_TIMEOUT_S)
                survivors = [p for p in workers if alive(p)]
        finally:
            # torchrun's workers lead sessions of their own: ending the agent's group misses them.
            strays = _descendants(agent) if agent.returncode is None else []
            child_launcher.end(agent)
            reaping.end_processes([p for p in workers if alive(p)])  # whatever the drill failed to clean
            for proc in strays:
                with contextlib.suppress(psutil.NoSuchProcess):
                    proc.kill()  # psutil checks the process is still the one it found (pid reuse)
        memory_fields = memory.settle()
    return DrillOutcome(
        drill=ctx.name,
        injected=Injection(what=f"SIGKILL to the torchrun agent (pid {agent.pid})", rank="launcher", at=injected_at),
        culprit_reason="the launcher itself was the victim",
        leaked_pids=survivors,
        **memory_fields,
        run_dir=str(run.path),
        run_id=run_id,
        interrupted=bool(interrupts.requested()),
        details=TorchrunDetails(launcher="torchrun", worker_pids=workers, orphans_after_kill=orphans,
                                clean_exit_code=clean.returncode if clean else None,
                                clean_output=clean.stdout[-1500:] if clean else "",
                                cleaned=bool(orphans) and not survivors),
    )


def wait_for_torchrun_workers(agent_pid: int, count: int, ready: Path, timeout_s: float = 120) -> list[int]:
    """The agent's ``count`` workers, once each has written its ready file (after init and its allocation),
    never on a timer: a worker killed mid-init can end on its own, and the drill would miss an orphan."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not interrupts.requested():
        try:
            kids = psutil.Process(agent_pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        workers = [k.pid for k in kids if _is_victim_worker(k)]
        if len(workers) >= count and len(list(ready.glob("*"))) >= count:
            return sorted(workers)
        time.sleep(0.3)
    return []


def _is_victim_worker(proc: psutil.Process) -> bool:
    try:
        return proc_facts.TORCHRUN_MARKER in proc.environ() and WORKER_MODULE in " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
        return False


def _torchrun_run_id(workers: list[int]) -> str | None:
    for pid in workers:
        try:
            return psutil.Process(pid).environ().get(proc_facts.TORCHRUN_MARKER)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return None


def _descendants(child: subprocess.Popen) -> list[psutil.Process]:
    try:
        return psutil.Process(child.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
