"""One multi-rank run of a workload: detect, plan, start the sharing daemon the plan chose
(re-planning without it when it cannot be used), launch, sample, supervise. Shared by
every command that starts ranks (train, storm, sweep, ceiling, contention, drills), so each
command only says what its ranks do and how to summarise what they return.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

from .config import LaunchOptions
from .launch import LaunchResult, Rendezvous, RunDir, launch
from .platform import Platform
from .policy import Placement
from .supervisor import Supervisor


@dataclass
class Session:
    platform: Platform
    placement: Placement
    run: RunDir
    outcome: LaunchResult
    sampler: Any  # sampler.RankSampler, after it stopped
    daemon: dict | None = None  # what the sharing daemon did (or why it was not used), when the plan chose one
    hang: dict | None = None  # what the supervisor declared, when it declared a hang
    ended_at: float = 0.0  # wall time the launch returned
    nnodes: int = 1

    def rank_values(self) -> list[dict]:
        return [self.outcome.return_values[r] for r in sorted(self.outcome.return_values)]

    def common_results(self) -> dict:
        """What every multi-rank command reports: placement, outcome, ranks, time series."""
        outcome, placement = self.outcome, self.placement
        return {
            "backend": placement.backend,
            "backend_reason": placement.backend_reason,
            "shared_device": placement.shared_device,
            "placement": placement.to_dict(),
            "warnings": list(placement.warnings),
            "sharing_daemon": self.daemon,
            "run_id": outcome.run_id,
            "run_dir": outcome.run_dir,
            "world_size": self.world_size(),
            "nnodes": self.nnodes,
            "completed": outcome.ok and bool(outcome.return_values),
            "ranks": self.rank_entries(),
            "torchrun_root_cause_rank": outcome.torchrun_root_cause_rank,
            "launcher_error": outcome.launcher_error,
            "listen": outcome.listen,
            "interrupted": outcome.interrupted,
            "hang": self.hang,
            "expected_failure": placement.expected_failure,
            "expected_failure_observed": self._refusal_seen(),
            "duration_s": round(outcome.duration_s, 3),
            "timeseries": self.sampler.timeseries(),
        }

    def _refusal_seen(self) -> bool | None:
        """Did the library refuse with the words the policy predicted (forced backend)?"""
        refusal = self.placement.expected_failure
        if not refusal or self.outcome.ok:
            return None
        quoted = refusal.split('"')[1] if '"' in refusal else refusal
        text = " ".join(f.message + f.log_tail for f in self.outcome.failures.values())
        return quoted.lower() in text.lower()

    def world_size(self) -> int:
        reported = [v.get("world_size") for v in self.outcome.return_values.values() if v.get("world_size")]
        return reported[0] if reported else len(self.placement.device_indices) * self.nnodes

    def local_ranks(self) -> dict[int, int]:
        """Global rank -> local rank of the ranks this launcher started.

        Elastic keys results by global rank and gives each node a contiguous block of
        nproc ranks in local-rank order, so one known global rank locates the block.
        """
        n = len(self.placement.device_indices)
        seen = set(self.run.rank_pids()) | set(self.outcome.return_values) | set(self.outcome.failures)
        base = (min(seen) // n) * n if seen else 0
        return {base + i: i for i in range(n)}

    def rank_entries(self) -> list[dict]:
        """One entry per rank this launcher started, finished or not: identity, status, sampler peaks, result."""
        peaks = self.sampler.peaks()
        pids = self.run.rank_pids()
        entries = []
        for rank, local in self.local_ranks().items():
            value = self.outcome.return_values.get(rank)
            failure = self.outcome.failures.get(rank)
            entry = {"rank": rank, "local_rank": local,
                     "pid": (value or {}).get("pid") or (failure.pid if failure else pids.get(rank)),
                     "device": self.placement.device_label(local),
                     "peak_mem_bytes": (value or {}).get("peak_mem_bytes"),
                     "status": "finished" if value else ("failed" if failure else "stopped by launcher")}
            entry.update(peaks.get(rank, {}))
            if value:
                entry.update({k: v for k, v in value.items() if k not in entry})
            if failure:
                entry["failure"] = {"exitcode": failure.exitcode, "signal": failure.signal,
                                    "message": failure.message[-1500:], "log_tail": failure.log_tail}
            entries.append(entry)
        return entries


def prepare(opts: LaunchOptions, with_memory: bool = False) -> tuple[Platform, Placement]:
    """Everything that can refuse the request, before anything is started or written."""
    from .platform import detect
    from .policy import plan

    platform = detect(opts.device, with_memory=with_memory)
    return platform, plan(opts, platform)


def start_sharing_daemon(opts: LaunchOptions, platform: Platform, placement: Placement, run_path,
                         make_daemon: Callable | None = None) -> tuple[Placement, Any]:
    """Start the sharing daemon the placement chose, if any; returns (placement to run, daemon or None).

    If the daemon cannot be used (it does not start, or refuses a test client), it is stopped
    at once and the run is re-planned without it: the policy's reason and warning say why
    (with --mps that is an error, exit 3). The caller stops a returned daemon in its finally.
    ``make_daemon(vendor, run_path)`` is the seam tests use to inject a daemon that fails.
    """
    from .platform import sharing_daemon as daemon_mod
    from .policy import plan

    if placement.sharing_daemon is None:
        return placement, None
    daemon = (make_daemon or daemon_mod.PrivateDaemon)(platform.spec, run_path)
    try:
        env = daemon.start(placement.device_indices)
    except daemon_mod.DaemonUnusable as exc:
        daemon.stop()
        return plan(opts, platform, daemon_failure=exc.message), daemon
    except BaseException:
        daemon.stop()
        raise
    return replace(placement, env={**placement.env, **env}), daemon


def run_workload(workload: str, payload: dict, opts: LaunchOptions, label: str, console=None,
                 live: bool = True, sample: bool = True, prepared: tuple | None = None,
                 controller: Callable[[RunDir], None] | None = None,
                 make_daemon: Callable | None = None, sample_device_while_timing: bool = False) -> Session:
    """Start ``opts.nproc`` ranks running ``workload`` with ``payload`` as its settings.

    The sampler keeps its device queries out of the ranks' timed windows unless
    ``sample_device_while_timing`` (timed_windows.py).

    ``controller(run)``, if given, runs in a launcher-side thread while the ranks run
    (fault drills inject kills and pauses from there). ``make_daemon``: see start_sharing_daemon.
    """
    from . import display
    from .platform import open_monitor
    from .sampler import RankSampler
    from .worker import rank_main

    platform, placement = prepared or prepare(opts)
    run = RunDir.create(opts.run_dir, label)
    monitor = daemon = None
    try:
        placement, daemon = start_sharing_daemon(opts, platform, placement, run.path, make_daemon)
        if console is not None:
            display.announce(console, placement, opts.nproc, run)
            if daemon is not None:
                console.print(f"sharing daemon: {daemon.describe()}")
        job = {
            "workload": workload,
            "placement": placement.to_dict(),
            "platform_backend": platform.backend,
            "timeout_s": opts.timeout_s,
            workload: payload,
        }
        monitor = open_monitor(platform.spec)
        with display.live_ranks(console if live else None) as update, \
                RankSampler(run, monitor, on_sample=update, enabled=sample,
                            query_device_while_timing=sample_device_while_timing) as sampler, \
                Supervisor(run.path, opts.nproc, opts.hang_timeout_s) as supervisor:
            if controller is not None:
                threading.Thread(target=controller, args=(run,), name="ddplab-controller", daemon=True).start()
            rdzv = Rendezvous(nnodes=opts.nnodes, endpoint=opts.rdzv_endpoint or Rendezvous.endpoint)
            outcome = launch(rank_main, job, opts.nproc, run, rdzv)
            ended_at = time.time()
    finally:
        if monitor is not None:
            monitor.close()
        if daemon is not None:
            daemon.stop()  # never leave a daemon behind, least of all one a crashed rank may have poisoned
    return Session(platform, placement, run, outcome, sampler, daemon.record() if daemon else None,
                   supervisor.hang, ended_at, opts.nnodes)
