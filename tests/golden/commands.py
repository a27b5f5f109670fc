"""The command lines whose JSON key sets the golden test pins (issue 11: the redesign keeps every key).

Small settings, so that all of them together take about a minute on 2 cores. ``keys.json`` holds the key
paths each produced on the code before the redesign (make_keys.py writes it).
"""

FIXTURE = "{fixtures}/all_reduce_perf_2xH200_nccl2.28.9.txt"

COMMANDS = {
    "env": ["env"],
    "clean": ["clean"],
    "train": ["train", "--nproc", "2", "--steps", "2"],
    "storm": ["storm", "--nproc", "2", "--iters", "50"],
    "sweep": ["sweep", "--nproc", "2", "--ops", "all", "-b", "8", "-e", "64", "-f", "8", "-n", "1", "-w", "0"],
    "ceiling": ["ceiling", "--bytes", "1M", "--host-bytes", "1M", "--iters", "2"],
    "contention": ["contention", "--nproc", "2", "--seconds", "0.2", "--size", "32"],
    "drill": ["drill", "kill_rank", "--timeout", "8"],
    "compare": ["compare", FIXTURE, "{out}/sweep.json", "--tolerance", "10000%"],
}

# Key paths that exist or not depending on how a run went, not on the code: a spike on a busy
# machine, the time series of a run too short to be sampled (a drill's ranks are killed about a second
# after they start: the 0.5 s sampler sees them or not, and its per-rank peaks with them).
DRILL_SESSION = "results.drills[].session."
# The sampler's per-rank peaks (records/session.py SamplerPeaks) are written only for a rank the sampler saw,
# as before the redesign. It finds a rank by its pid file, written once torch is imported, and samples every
# 0.5 s; the golden ceiling (two 1 MB copies), storm and sweep ranks are done within about 0.5 s of that, so
# one run has the peaks and the next may not. A rank that was sampled writes all four (checked on ceiling).
SAMPLER_PEAKS = ("peak_device_mem_bytes", "peak_rss_bytes", "cpu_user_s", "cpu_system_s")
# ...except keys a command's own rank result writes whether sampled or not: they stay pinned for it.
OWN_RANK_KEYS = {"storm": ("cpu_user_s", "cpu_system_s")}  # records/storm.py StormRankResult
VOLATILE = ("results.spikes[]", "results.timeseries.samples[]", "results.ranks[].failure",
            "results.sampler.device_query_windows[]", "results.rows[].spike",
            DRILL_SESSION + "timeseries.samples[]",
            *(DRILL_SESSION + f"ranks[].{k}" for k in SAMPLER_PEAKS))


# Lists whose elements exist or not depending on the machine, not on the code: orphans and other processes
# that other runs on the machine left or hold; the straggler watch's lateness and findings, which a job as short
# as the golden launch's has or not depending on whether its ranks read their recorders before it ended. The
# list itself is pinned; its elements' keys are pinned by tests/unit/test_env_clean_launch_records.py and
# tests/unit/test_stragglers.py.
MACHINE_LISTS = ("results.orphans[]", "results.other_processes[]", "results.stragglers.lateness[]",
                 "results.stragglers.findings[]")


def stable(paths: set[str], command: str = "") -> set[str]:
    """``paths`` without the volatile ones (``command``: whose document they are, for its own rank keys)."""
    sampled_only = tuple(f"results.ranks[].{k}" for k in SAMPLER_PEAKS if k not in OWN_RANK_KEYS.get(command, ()))
    kept = {p for p in paths if not p.startswith(VOLATILE + sampled_only)}
    return {next((m for m in MACHINE_LISTS if p.startswith(m)), p) for p in kept}
