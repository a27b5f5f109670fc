"""desync: the victim switches to a different collective (broadcast of twice the size)
while the others keep issuing all_reduce. Whatever the backend does (error, hang or, worst,
silently wrong data), ddplab's status files show which rank issued which operation.
"""

from .common import judge, run_inprocess

SUMMARY = "ranks issue different collectives or sizes"
EXPECT = "detected within timeout + 5 s, both operations and the ranks issuing them named"


def run(opts, console=None) -> dict:
    out = run_inprocess("desync", opts, "desync", console)
    ops = {}
    for rank, state in (out["session"].get("hang") or {}).get("snapshot", {}).items():
        ops[rank] = f"{state.get('op')}({state.get('numel')}) #{state.get('seq')}"
    out["operations"] = ops
    out["verdict"] = judge(out, opts.victim, opts.timeout_s, out["device_mem_before_bytes"] is not None)
    return out
