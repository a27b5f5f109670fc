"""Watch the ranks while they run: the report's `watch -n 0.5 nvidia-smi`, kept as data.

A thread in the launcher samples every ``interval_s`` each rank's CPU times, RSS and context switches (psutil)
and its device memory and utilisation (the platform's monitor), keeping device queries out of the ranks' timed
windows unless told otherwise (timed_windows.py).
"""

from __future__ import annotations

import threading
import time
from typing import Callable

import psutil

from ..records.session import RankSample, Sample, SamplerPeaks, Timeseries
from ..basics.rundir import RunDir
from ..platform import DeviceMonitor, DeviceSample
from .timed_windows import device_query

METHOD = ("every {interval}s in the launcher: psutil cpu_times/memory_info/num_ctx_switches per rank pid; "
          "device memory and utilisation per pid from {api}")


class RankSampler:
    def __init__(self, run: RunDir, monitor: DeviceMonitor, interval_s: float = 0.5,
                 on_sample: Callable[[Sample], None] | None = None, enabled: bool = True,
                 query_device_while_timing: bool = False, max_samples: int | None = None):
        self.run = run
        self.monitor = monitor
        self.interval_s = interval_s
        self.on_sample = on_sample
        self.enabled = enabled  # off: measure a benchmark without the sampler's own disturbance
        # A job of unknown length keeps at most this many samples: past it, every other one is dropped and the
        # interval doubles, so a day-long job's series stays as even and as small.
        self.max_samples = max_samples
        self.keep_out_of_timed_windows = not query_device_while_timing
        self.samples: list[Sample] = []
        self.device_queries: list[tuple[float, float]] = []  # wall-clock (start, end) of each device query
        self.device_queries_skipped = 0  # skipped because a rank was timing
        self._procs: dict[int, psutil.Process] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ddplab-sampler", daemon=True)
        self._t0 = time.monotonic()
        self._started_at: float | None = None  # wall time of t_s = 0, once sampling started

    def __enter__(self):
        self._t0 = time.monotonic()
        self._started_at = time.time()
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self.enabled:
            self._thread.join(timeout=5)

    def _loop(self):
        while not self._stop.is_set():
            sample = self.sample_once()
            if sample.ranks:
                self.samples.append(sample)
                if self.on_sample:
                    self.on_sample(sample)
                if self.max_samples and len(self.samples) > self.max_samples:
                    self.samples = self.samples[::2]
                    self.interval_s *= 2
            self._stop.wait(self.interval_s)

    def sample_once(self) -> Sample:
        device = self._query_device()
        ranks = []
        for rank, pid in sorted(self.run.rank_pids().items()):
            try:
                proc = self._procs.get(pid) or self._procs.setdefault(pid, psutil.Process(pid))
                with proc.oneshot():
                    cpu = proc.cpu_times()
                    ctx = proc.num_ctx_switches()
                    rss = proc.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            ranks.append(RankSample(rank=rank, pid=pid, cpu_user_s=round(cpu.user, 3),
                                    cpu_system_s=round(cpu.system, 3), ctx_switches=ctx.voluntary + ctx.involuntary,
                                    rss_bytes=rss, device_mem_bytes=device.process_mem_bytes.get(pid),
                                    device_util_pct=device.process_util_pct.get(pid)))
        return Sample(t_s=round(time.monotonic() - self._t0, 3), ranks=ranks,
                      device_used_bytes=dict(device.device_used_bytes), device_util_pct=dict(device.device_util_pct))

    def _query_device(self) -> DeviceSample:
        if not self.keep_out_of_timed_windows:
            return self._timed_query()
        with device_query(self.run) as clear:
            if clear:
                return self._timed_query()
        self.device_queries_skipped += 1
        return DeviceSample()  # empty: "not available" for this sample, never zero

    def _timed_query(self) -> DeviceSample:
        start = time.time()
        try:
            return self.monitor.sample()
        finally:
            self.device_queries.append((start, time.time()))

    def timeseries(self) -> Timeseries:
        return Timeseries(
            enabled=self.enabled,
            interval_s=self.interval_s,
            method=METHOD.format(interval=self.interval_s, api=self.monitor.api or "nowhere (no vendor API)"),
            samples=list(self.samples),
            device_queries_kept_out_of_timed_windows=self.enabled and self.keep_out_of_timed_windows,
            device_queries=len(self.device_queries),
            device_queries_skipped_while_timing=self.device_queries_skipped,
            started_at=self._started_at if self.enabled else None,
        )

    def peaks(self) -> dict[int, SamplerPeaks]:
        """Per rank: peak device memory and RSS seen, last CPU times."""
        out: dict[int, SamplerPeaks] = {}
        for s in self.samples:
            for r in s.ranks:
                cur = out.get(r.rank, SamplerPeaks(peak_device_mem_bytes=None, peak_rss_bytes=0))
                device = cur.peak_device_mem_bytes
                if r.device_mem_bytes is not None:
                    device = max(device or 0, r.device_mem_bytes)
                out[r.rank] = SamplerPeaks(peak_device_mem_bytes=device,
                                           peak_rss_bytes=max(cur.peak_rss_bytes or 0, r.rss_bytes),
                                           cpu_user_s=r.cpu_user_s, cpu_system_s=r.cpu_system_s)
        return out
