"""oom: the victim allocates 1 GiB beyond its memory cap.

On a device the cap is the allocator fraction (default here 0.25 of the device), and the
allocator's error names it ("N GiB allowed"). On the host there is no allocator cap, so
the victim caps its own address space (RLIMIT_AS) 256 MiB above what it uses and exceeds
that. Expected: a clear out-of-memory error naming the cap, the others torn down, memory
back, nothing left.
"""

from .common import judge, run_inprocess

SUMMARY = "one rank allocates beyond its memory cap"
EXPECT = "the victim fails with an out-of-memory error naming its cap, the group is torn down, nothing left"
DEFAULT_FRACTION = 0.25


def run(opts, console=None) -> dict:
    from .. import status
    from .common import classify, excerpt

    out = run_inprocess("oom", opts, "oom", console, memory_fraction=DEFAULT_FRACTION)
    victim_error = status.read_all(out["session"]["run_dir"]).get(opts.victim, {}).get("error", "")
    out["victim_error"] = excerpt(victim_error)
    out["victim_error_names_cap"] = classify(victim_error) == "out-of-memory error" and (
        "cap" in victim_error or "allowed" in victim_error)
    verdict = judge(out, opts.victim, opts.timeout_s, out["device_mem_before_bytes"] is not None)
    out["verdict"] = verdict if out["victim_error_names_cap"] else "fail"
    return out
