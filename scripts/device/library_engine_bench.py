"""The library engine before it is wired into storm/sweep (issue 14): one rank of a job started by
`ddplab launch` (or torchrun), calling the collective library through platform/library_binding.py.

    python -m ddplab launch --nproc-per-node 2 --out DIR -- scripts/device/library_engine_bench.py \
        --storm 10000 --ops all -b 8 -e 1G -f 2 --json-dir DIR

- storm: a 4-byte all_reduce, N calls back to back then one sync (pipelined), and a sync after each
  (blocking), library and torch engines alternating three times on the same buffer, so the
  framework's cost per call is their difference measured back to back.
- sweep: every collective and placement through the library engine, on the buffers and with the
  byte counts and check of `ddplab sweep` (collectives/*.py), timed like it (-n iters, -w warmup,
  -R repetitions, median), printed in nccl-tests' columns.
Rank 0 prints and writes library_sweep.json, a sweep report as `ddplab sweep --json` writes one (so
`ddplab compare` reads it), and library_storm.json (its own shape: the rounds); both are marked
"engine": "library". On CPU it runs with a test binding: DDPLAB_LIBRARY_BINDING=tests.library_fake:GlooBinding.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path


def main() -> None:
    args = _parse()
    import torch.distributed as dist

    from ddplab import platform
    from ddplab.platform import DeviceRuntime
    from ddplab.platform.library_binding import open_binding

    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    plat = platform.detect(with_memory=False)
    runtime = DeviceRuntime(plat.device_type, 0 if plat.is_host_only else local_rank)
    runtime.activate()
    dist.init_process_group(plat.backend, device_id=None if runtime.is_host else runtime.device)
    binding = open_binding(plat)
    status = binding.available()
    comm = binding.communicator(device_index=None if runtime.is_host else runtime.index)
    if rank == 0:
        print(f"# binding: {status.reason} (same library as torch: {status.same_library_as_framework})", flush=True)
    header = {"binding": status.to_dict(), "communicator": comm.describe(), "platform": plat.to_dict()}
    if args.storm:
        _publish("storm", _storm(comm, runtime, args.storm, args.per_op), header, args, rank)
    if args.ops:
        _publish("sweep", _sweep(comm, runtime, args), header, args, rank)
    comm.close()
    dist.destroy_process_group()


def _parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--storm", type=int, default=0, help="4-byte all_reduces per storm pass (0: no storm)")
    p.add_argument("--per-op", type=int, default=1000, help="blocking calls timed one by one in the storm")
    p.add_argument("--ops", default="", help="collectives to sweep: comma list or 'all' (empty: no sweep)")
    p.add_argument("-b", "--minbytes", default="8")
    p.add_argument("-e", "--maxbytes", default="1G")
    p.add_argument("-f", "--stepfactor", type=float, default=2.0)
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("-w", "--warmup", type=int, default=5)
    p.add_argument("-R", "--repeat", type=int, default=3)
    p.add_argument("--mode", default="pipelined", choices=("pipelined", "blocking"))
    p.add_argument("--dtype", default="float")
    p.add_argument("--json-dir", default=".")
    return p.parse_args()


# ----------------------------------------------------------------------------------------------

def _storm(comm, runtime, iters: int, per_op: int) -> dict:
    import torch

    from ddplab import collectives
    from ddplab.workloads.common import barrier, blocking_us, pipelined_us

    prepared = collectives.get("all_reduce").prepare(1, comm.world_size, comm.rank, torch.float32, runtime.device,
                                                     True)
    library, framework = comm.bind(prepared.library), prepared.run
    prepared.output.zero_()  # sums of zeros stay zero, however many calls (as `ddplab storm`)
    for _ in range(100):
        library()
        framework()
    runtime.synchronize()
    rounds = []
    for _ in range(3):  # alternate, so drift on the machine shows in both engines alike
        barrier()
        lib_pipelined = pipelined_us(library, comm, iters)
        barrier()
        torch_pipelined = pipelined_us(framework, runtime, iters)
        barrier()
        lib_blocking = blocking_us(library, comm, per_op)
        barrier()
        torch_blocking = blocking_us(framework, runtime, per_op)
        rounds.append({"library_pipelined_us": lib_pipelined, "torch_pipelined_us": torch_pipelined,
                       "library_blocking_us": _summary(lib_blocking), "torch_blocking_us": _summary(torch_blocking)})
    prepared.fill()
    runtime.synchronize()
    barrier()
    comm.follow_framework()
    library()
    comm.synchronize()
    return {"iters": iters, "per_op": per_op, "rounds": rounds, "num_wrong": prepared.wrong()}


def _summary(values: list[float]) -> dict:
    ordered = sorted(values)
    return {"mean": statistics.fmean(values), "p50": ordered[len(ordered) // 2],
            "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]}


def _sweep(comm, runtime, args) -> list[dict]:
    import torch

    from ddplab import collectives
    from ddplab.collectives.common import torch_dtype
    from ddplab.sizes import size_range

    dtype = torch_dtype(args.dtype)
    elem = torch.tensor([], dtype=dtype).element_size()
    rows = []
    for name in collectives.parse_ops(args.ops):
        spec = collectives.get(name)
        for size in size_range(args.minbytes, args.maxbytes, args.stepfactor):
            count = spec.count_for(size, comm.world_size, elem)
            if count == 0:
                continue
            for in_place in spec.placements:
                rows.append(_row(comm, runtime, spec, count, elem, dtype, in_place, args))
    return rows


def _row(comm, runtime, spec, count, elem, dtype, in_place, args) -> dict:
    from ddplab.workloads.common import barrier, blocking_us, pipelined_us

    row = {"op": spec.name, "size_bytes": count * elem, "count": count, "in_place": in_place}
    try:
        prepared = spec.prepare(count, comm.world_size, comm.rank, dtype, runtime.device, in_place)
        issue = comm.bind(prepared.library)
        runtime.synchronize()
        comm.follow_framework()
        for _ in range(args.warmup):
            issue()
        comm.synchronize()
        row["repeats"] = []
        for _ in range(args.repeat):
            barrier()
            start = time.time()
            took = (pipelined_us(issue, comm, args.iters) if args.mode == "pipelined"
                    else statistics.fmean(blocking_us(issue, comm, args.iters)))
            row["repeats"].append({"time_us": took, "window": [start, time.time()], "sampler_wait_s": 0.0})
        prepared.fill()
        runtime.synchronize()
        barrier()
        comm.follow_framework()
        issue()
        comm.synchronize()
        row["num_wrong"] = prepared.wrong()
        del prepared, issue
    except Exception as exc:  # every rank fails alike; the sweep goes on, as `ddplab sweep` does
        row["error"] = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
    return row


# ----------------------------------------------------------------------------------------------

def _publish(what: str, mine, header: dict, args, rank: int) -> None:
    import torch.distributed as dist

    part = Path(args.json_dir, f".library_{what}.rank{rank}.json")  # one machine: the ranks share its disk
    part.parent.mkdir(parents=True, exist_ok=True)
    part.write_text(json.dumps(mine))
    dist.barrier()
    if rank != 0:
        return
    parts = [Path(args.json_dir, f".library_{what}.rank{r}.json") for r in range(dist.get_world_size())]
    gathered = [json.loads(p.read_text()) for p in parts]
    for p in parts:
        p.unlink()
    doc = _storm_doc(gathered, header) if what == "storm" else _sweep_doc(gathered, header, args)
    path = Path(args.json_dir, f"library_{what}.json")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(path)
    print(f"# wrote {path}", flush=True)


def _storm_doc(per_rank: list[dict], header: dict) -> dict:
    n = len(per_rank)
    rounds = []
    for same in zip(*(r["rounds"] for r in per_rank)):  # mean over ranks, as nccl-tests -a 1
        avg = {k: sum(x[k] for x in same) / n for k in ("library_pipelined_us", "torch_pipelined_us")}
        for k in ("library_blocking_us", "torch_blocking_us"):
            avg[k] = {s: sum(x[k][s] for x in same) / n for s in ("mean", "p50", "p99")}
        rounds.append(avg)
    for i, r in enumerate(rounds):
        print(_round_line(i + 1, r, per_rank[0]["iters"]), flush=True)
    wrong = sum(r["num_wrong"] for r in per_rank)
    mean = statistics.median(r["library_pipelined_us"] for r in rounds)
    print(f"# storm: library engine {mean:.2f} us (median of 3 rounds), #wrong {wrong}", flush=True)
    return {"command": "storm", "config": {"bytes": 4, "iters": per_rank[0]["iters"], "engine": "library"},
            "results": {"completed": True, "mean_us": mean, "rounds": rounds, "num_wrong": wrong, **header},
            "verdict": "pass" if wrong == 0 else "fail"}


def _round_line(number: int, r: dict, iters: int) -> str:
    lib, fw = r["library_pipelined_us"], r["torch_pipelined_us"]
    return (f"# storm round {number}: 4 B all_reduce, {iters} calls  library {lib:.2f} us  torch {fw:.2f} us  "
            f"torch adds {fw - lib:.2f} us ({100 * (fw - lib) / fw:.0f}%) | blocking mean/p50/p99  "
            f"library {_fmt(r['library_blocking_us'])}  torch {_fmt(r['torch_blocking_us'])}")


def _fmt(s: dict) -> str:
    return f"{s['mean']:.1f}/{s['p50']:.1f}/{s['p99']:.1f}"


def _sweep_doc(per_rank: list[list[dict]], header: dict, args) -> dict:
    """The library engine's sweep as a sweep report: rows merged as `ddplab sweep` merges them."""
    from ddplab import collectives, measurements
    from ddplab.commands.sweep import nccl_tests_table
    from ddplab.config import SweepConfig
    from ddplab.measurements import sweep
    from ddplab.records.codec import from_json
    from ddplab.records.sweep import SweepRankResult, SweepRankRow, SweepSettings
    from ddplab.sizes import size_range

    config = SweepConfig(ops=tuple(collectives.parse_ops(args.ops)),
                         sizes=tuple(size_range(args.minbytes, args.maxbytes, args.stepfactor)), dtype=args.dtype,
                         mode=args.mode, iters=args.iters, warmup=args.warmup, repeat=args.repeat, sample=False)
    settings = SweepSettings(ops=config.ops, sizes=config.sizes, dtype=config.dtype, mode=config.mode,
                             iters=config.iters, warmup=config.warmup, check=True, repeat=args.repeat)
    results = [SweepRankResult(rows=[from_json(SweepRankRow, row) for row in rows], ceiling=None) for rows in per_rank]
    record = sweep.summarise(_session(header, len(per_rank)), results, settings, None, [], host_only=False)
    print(nccl_tests_table(record), flush=True)
    for e in record.errors:
        print(f"# ERROR {e.op} {e.size_bytes} B in_place={e.in_place}: {e.error}", flush=True)
    doc = measurements.report(sweep, config, record).to_json()
    doc["config"]["engine"] = "library"
    doc["platform"] = header["platform"]
    doc["results"].update(binding=header["binding"], communicator=header["communicator"])
    return doc


def _session(header: dict, n: int):
    """What the sweep report says about the run: ranks started by `ddplab launch`, not by a ddplab session."""
    from ddplab.records.session import SessionRecord, Timeseries

    return SessionRecord(
        backend=f"{header['binding']['name']} (library engine)", backend_reason="the collective library called "
        "through its binding (platform/library_binding.py), one rank per device under `ddplab launch`",
        shared_device=False, placement=None, warnings=[], sharing_daemon=None, run_id="", run_dir="", world_size=n,
        nnodes=1, completed=True, ranks=[], torchrun_root_cause_rank=None, launcher_error=None, listen=None,
        interrupted=False, hang=None, expected_failure=None, expected_failure_observed=None, duration_s=0.0,
        timeseries=Timeseries(enabled=False, interval_s=0.0, method="no sampler: ranks started by ddplab launch"))


if __name__ == "__main__":
    main()
