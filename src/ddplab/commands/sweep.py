"""`ddplab sweep`: nccl-tests from Python. Same sizes (-b/-e/-f), byte counts, bus factors
(GB = 1e9) and column layout, so the two outputs can be put side by side; a correctness
check at every size with exact data; nonzero exit on wrong data or busbw below --min-busbw.
Each size is measured -R times and reports the median repetition with its spread; a size
far off its neighbours is flagged as a spike (spikes.py), a WARN and never a silent number.
"""

from __future__ import annotations

import argparse

from .. import collectives, display, report, spikes, timed_windows
from ..collectives.common import DTYPES
from ..config import check_number
from ..errors import invalid_choice
from ..sizes import size_range
from ..workloads.common import MODES
from . import options

SUMMARY = "nccl-tests-style sweep: algbw/busbw per size for each collective, with correctness checks"
MAX_ITERS = 100_000
MAX_REPEAT = 100
REPEAT_ON_ACCELERATOR = 3  # one disturbed repetition cannot move the median of three
REPEAT_ON_HOST = 1  # the host runs gloo as a functional check; the lab asks for -R 3 (profiles.py)
MAX_BUSBW_GBPS = 1e6  # a petabyte per second: no interconnect is near it
CEILING_MAX_BYTES = 1 << 30
# Bytes a rank holds per size: inputs, outputs and the expected buffer of the check.
BUFFERS_PER_SIZE = 4


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_launch_arguments(parser)
    parser.add_argument("--ops", default="all_reduce",
                        help=f"comma list or 'all'; from {', '.join(collectives.COLLECTIVES)} (default: all_reduce)")
    parser.add_argument("-b", "--minbytes", default="8", help="smallest size, K/M/G suffixes (default: 8)")
    parser.add_argument("-e", "--maxbytes", default="64M", help="largest size (default: 64M)")
    parser.add_argument("-f", "--stepfactor", type=float, default=2.0, help="size multiplier (default: 2)")
    parser.add_argument("-n", "--iters", type=int, default=20, help="timed iterations per size (default: 20)")
    parser.add_argument("-w", "--warmup", type=int, default=5, help="untimed iterations per size (default: 5)")
    parser.add_argument("-R", "--repeat", type=int, default=None,
                        help=f"times each size is measured (each one -n iterations, as nccl-tests); the row "
                             f"reports the median and the spread (default: {REPEAT_ON_ACCELERATOR} on an "
                             f"accelerator, {REPEAT_ON_HOST} on the host CPU)")
    parser.add_argument("--no-sample", dest="sample", action="store_false",
                        help="do not sample ranks while the sweep runs (to measure the sampler's own cost)")
    parser.add_argument("--sample-while-timing", action="store_true",
                        help="let the sampler query the device inside timed windows too (by default it keeps "
                             "out of them; this is the old behaviour, to test whether it causes spikes)")
    parser.add_argument("--dtype", default="float", help=f"one of {', '.join(DTYPES)} (default: float)")
    parser.add_argument("--mode", default="pipelined",
                        help="pipelined (nccl-tests default) or blocking (nccl-tests -z 1) (default: pipelined)")
    parser.add_argument("--check", dest="check", action="store_true", default=True,
                        help="check results at every size (default)")
    parser.add_argument("--no-check", dest="check", action="store_false", help="skip the correctness check")
    parser.add_argument("--min-busbw", type=float, default=None,
                        help="fail when the average busbw (GB/s, as nccl-tests' footer) is below this")


def settings(args) -> dict:
    ops = collectives.parse_ops(args.ops)
    sizes = size_range(args.minbytes, args.maxbytes, args.stepfactor)
    if args.dtype not in DTYPES:
        raise invalid_choice("dtype", args.dtype, DTYPES)
    if args.mode not in MODES:
        raise invalid_choice("mode", args.mode, MODES)
    check_number(args.iters, "-n", 1, MAX_ITERS, integer=True, reference="invalid-iters")
    check_number(args.warmup, "-w", 0, MAX_ITERS, integer=True, reference="invalid-warmup")
    if args.repeat is not None:
        check_number(args.repeat, "-R", 1, MAX_REPEAT, integer=True, reference="invalid-repeat")
    if args.min_busbw is not None:
        check_number(args.min_busbw, "--min-busbw", 0, MAX_BUSBW_GBPS, name="GB/s", low_open=True)
    return {"ops": ops, "sizes": sizes, "dtype": args.dtype, "mode": args.mode, "iters": args.iters,
            "warmup": args.warmup, "check": args.check, "repeat": args.repeat}


def default_repeat(host_only: bool) -> int:
    return REPEAT_ON_HOST if host_only else REPEAT_ON_ACCELERATOR


def validate(args) -> None:
    options.launch_options(args)
    settings(args)


def _check_memory(platform, placement, sizes: list[int]) -> None:
    """Refuse a sweep that cannot fit, before any rank allocates (free memory known only here)."""
    options.require_fits(platform, placement, BUFFERS_PER_SIZE * max(sizes),
                         f"-e {max(sizes)} B ({BUFFERS_PER_SIZE} buffers per rank)", "sweep-too-large",
                         hint="lower -e/--maxbytes")


def execute(args, console=None, live: bool = True) -> dict:
    from .. import session

    opts = options.launch_options(args)
    s = settings(args)
    prepared = session.prepare(opts, with_memory=True)
    platform, placement = prepared
    _check_memory(platform, placement, s["sizes"])
    if placement.shared_device and not placement.host_only:
        s["ceiling_bytes"] = min(max(s["sizes"]), CEILING_MAX_BYTES)
    s["repeat"] = s["repeat"] or default_repeat(placement.host_only)
    sess = session.run_workload("sweep", s, opts, "sweep", console, live, prepared=prepared, sample=args.sample,
                                sample_device_while_timing=args.sample_while_timing)
    results = summarise(sess, s, args.min_busbw)
    config = {**opts.to_dict(), **s, "min_busbw": args.min_busbw, "sample": args.sample,
              "sample_while_timing": args.sample_while_timing}
    return report.document("sweep", config, sess.platform.to_dict(), results, _verdict(results))


def summarise(sess, s: dict, min_busbw: float | None) -> dict:
    results = sess.common_results()
    values = sess.rank_values()
    n = results["world_size"]
    queries = sess.sampler.device_queries
    rows = merge_rows([v["rows"] for v in values], n, s["dtype"], queries) if values else []
    ceiling = next((v["ceiling"] for v in values if v.get("ceiling")), None)
    if ceiling:
        for row in rows:
            if row.get("busbw_gbps") is not None:
                row["busbw_fraction_of_ceiling"] = row["busbw_gbps"] / ceiling["gbps"]
    timed = [r for r in rows if r.get("busbw_gbps") is not None]
    avg_busbw = sum(r["busbw_gbps"] for r in timed) / len(timed) if timed else None
    results.update({
        "mode": s["mode"],
        "time_method": ("pipelined: iters back to back, one device sync, wall/iters" if s["mode"] == "pipelined"
                        else "blocking: device sync after each op, mean of per-op wall times")
                       + f"; averaged over ranks; median of {s['repeat']} repetition(s) per size",
        "repeat": s["repeat"],
        "dtype": s["dtype"],
        "rows": rows,
        "num_wrong_total": sum(r.get("num_wrong") or 0 for r in rows),
        "errors": [r for r in rows if r.get("error")],
        "avg_busbw_gbps": avg_busbw,
        "min_busbw_gbps": min_busbw,
        "ceiling": ceiling,
        "spikes": spikes.find_spikes(rows),
        "spike_rule": spikes.RULE + ("; " + spikes.HOST_NOTE if sess.placement.host_only else ""),
        "sampler": _sampler_record(results["timeseries"], rows, queries),
    })
    return results


def _sampler_record(timeseries: dict, rows: list[dict], queries: list[tuple[float, float]]) -> dict:
    """Whether the launcher's sampler ran, whether it kept out of timed windows, and whether it did."""
    repetitions = [q for r in rows for q in r.get("repeat_sampler_queried", [])]
    return {
        "on": timeseries["enabled"],
        "device_queries_kept_out_of_timed_windows": timeseries["enabled"]
                                                    and timeseries["device_queries_kept_out_of_timed_windows"],
        "device_queries": len(queries),
        "device_queries_skipped_while_timing": timeseries["device_queries_skipped_while_timing"],
        "repetitions": len(repetitions),
        "repetitions_overlapped_by_a_device_query": sum(repetitions),
        "device_query_windows": [[round(a, 6), round(b, 6)] for a, b in queries],
        "method": "wall-clock windows: each rank's timed repetition (from its barrier to its last sync) against "
                  "each device query the sampler made (time.time() on both sides, one machine)",
    }


def merge_rows(per_rank_rows: list[list[dict]], n: int, dtype: str,
               device_queries: list[tuple[float, float]] = ()) -> list[dict]:
    """Average time over ranks (nccl-tests -a 1) per repetition, report the median repetition
    with the spread, sum wrong elements, derive algbw and busbw from the median."""
    merged = []
    for same in zip(*per_rank_rows):
        first = same[0]
        row = {"op": first["op"], "dtype": dtype}
        if "skipped" in first:
            merged.append({**row, "skipped": first["skipped"]})
            continue
        row.update(size_bytes=first["size_bytes"], count=first["count"], in_place=first["in_place"])
        errors = [r["error"] for r in same if r.get("error")]
        if errors:
            merged.append({**row, "error": errors[0]})
            continue
        spec = collectives.get(first["op"])
        repetitions = merge_repetitions([r["repeats"] for r in same], device_queries)
        median = median_repetition(repetitions)
        time_us = median["time_us"]
        elem = first["size_bytes"] // first["count"]
        algbw = spec.algbw_gbps(first["count"], elem, time_us)
        wrong = [r.get("num_wrong") for r in same]
        row.update(time_us=time_us, time_us_max_rank=median["time_us_max_rank"], algbw_gbps=algbw,
                   busbw_gbps=spec.busbw_gbps(algbw, n),
                   num_wrong=None if any(w is None for w in wrong) else sum(wrong),
                   repeat_us=[x["time_us"] for x in repetitions],
                   repeat_min_us=min(x["time_us"] for x in repetitions),
                   repeat_max_us=max(x["time_us"] for x in repetitions),
                   repeat_sampler_queried=[x["sampler_queried"] for x in repetitions])
        merged.append(row)
    return merged


def merge_repetitions(per_rank: list[list[dict]], device_queries=()) -> list[dict]:
    """One entry per repetition: time averaged over ranks, the slowest rank, and whether a
    device query of the sampler overlapped any rank's window."""
    out = []
    for reps in zip(*per_rank):
        times = [r["time_us"] for r in reps]
        out.append({"time_us": sum(times) / len(times), "time_us_max_rank": max(times),
                    "sampler_queried": any(timed_windows.overlaps(r["window"], device_queries) for r in reps)})
    return out


def median_repetition(repetitions: list[dict]) -> dict:
    """The median repetition by time; for an even count the lower middle one, so the row's
    numbers always come from one repetition that was measured."""
    ordered = sorted(repetitions, key=lambda x: x["time_us"])
    return ordered[(len(ordered) - 1) // 2]


def _verdict(r: dict) -> str:
    if not r["completed"] or r["num_wrong_total"] or r["errors"]:
        return "fail"
    if r["min_busbw_gbps"] is not None:
        if r["avg_busbw_gbps"] is None:
            return "warn"  # world size 1: busbw is not defined, the floor cannot be judged
        if r["avg_busbw_gbps"] < r["min_busbw_gbps"]:
            return "fail"
    return report.worst(["warn" if r["warnings"] else "pass", spikes.judge(r["spikes"], _host_only(r))])


def _host_only(r: dict) -> bool:
    return bool((r.get("placement") or {}).get("host_only"))


def nccl_tests_table(r: dict) -> str:
    """The rows in nccl-tests' column layout, one block per collective (N/A where torch has no such row)."""
    lines = []
    ops = dict.fromkeys(row["op"] for row in r["rows"])
    for op in ops:
        repeat = f", median of {r['repeat']} repetitions" if r.get("repeat", 1) > 1 else ""
        lines.append(f"# ddplab {op}, {r['world_size']} ranks, backend {r['backend']}, time: {r['mode']}{repeat}")
        lines.append(f"# {'':>10}  {'':>12}  {'':>6}  {'':>6}  {'':>6}  {'out-of-place':^30}  {'in-place':^30}")
        lines.append(f"# {'size':>10}  {'count':>12}  {'type':>6}  {'redop':>6}  {'root':>6}  " +
                     "  ".join([f"{'time':>7}  {'algbw':>6}  {'busbw':>6}  {'#wrong':>6}"] * 2))
        lines.append(f"# {'(B)':>10}  {'(elements)':>12}  {'':>6}  {'':>6}  {'':>6}  " +
                     "  ".join([f"{'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {'':>6}"] * 2))
        by_size: dict[int, dict[bool, dict]] = {}
        for row in r["rows"]:
            if row["op"] != op:
                continue
            if "skipped" in row:
                lines.append(f"#  skipped: {row['skipped']}")
                continue
            by_size.setdefault(row["size_bytes"], {})[row["in_place"]] = row
        redop = "sum" if op in ("all_reduce", "reduce", "reduce_scatter") else "none"
        root = "0" if op in ("broadcast", "reduce") else "-1"
        for size, cells in by_size.items():
            any_row = next(iter(cells.values()))
            parts = [_cell(cells.get(False)), _cell(cells.get(True))]
            lines.append(f"{size:>12}  {any_row['count']:>12}  {r['dtype']:>6}  {redop:>6}  {root:>6}  "
                         + "  ".join(parts))
        lines.extend(spike_notes([x for x in r.get("spikes", []) if x["op"] == op]))
    wrong = r["num_wrong_total"]
    lines.append(f"# Out of bounds values : {wrong} {'OK' if not wrong else 'FAILED'}")
    avg = r["avg_busbw_gbps"]
    lines.append(f"# Avg bus bandwidth    : {avg:.3f}" if avg is not None else "# Avg bus bandwidth    : n/a "
                                                                                 "(world size 1)")
    return "\n".join(lines)


def spike_notes(found: list[dict]) -> list[str]:
    """Comment lines after a block (nccl-tests parsers skip them), one per spike."""
    lines = []
    for x in found:
        around = " and ".join(f"{n['size_bytes']} B {n['time_us']:.2f} us" for n in x["neighbours"])
        lines.append(f"# SPIKE {x['size_bytes']} B {'in' if x['in_place'] else 'out-of'}-place: "
                     f"{x['time_us']:.2f} us, {x['factor']:.1f}x its neighbours ({around}): {spikes.FINDING}")
    return lines


def _cell(row: dict | None) -> str:
    if row is None:
        return f"{'N/A':>7}  {'N/A':>6}  {'N/A':>6}  {'N/A':>6}"
    if row.get("error"):
        return f"{'ERROR':>7}  {'':>6}  {'':>6}  {'':>6}"
    busbw = f"{row['busbw_gbps']:6.2f}" if row["busbw_gbps"] is not None else f"{'n/a':>6}"
    wrong = "N/A" if row["num_wrong"] is None else str(row["num_wrong"])
    return f"{_time(row['time_us'])}  {row['algbw_gbps']:6.2f}  {busbw}  {wrong:>6}"


def _time(us: float) -> str:
    return f"{us:7.2f}" if us < 10_000 else f"{us:7.1f}" if us < 100_000 else f"{us:7.0f}"


def render(doc: dict, console) -> None:
    r = doc["results"]
    display.failures(r, console)
    if r["completed"]:
        console.print(nccl_tests_table(r), markup=False, highlight=False, soft_wrap=True)
    for e in r["errors"]:
        console.print(f"[red]{e['op']} {e['size_bytes']} B in_place={e['in_place']}:[/] {e['error']}")
    if r.get("ceiling"):
        c = r["ceiling"]
        best = max((x.get("busbw_fraction_of_ceiling") or 0) for x in r["rows"]) if r["rows"] else 0
        console.print(f"device copy ceiling {c['gbps']:.1f} GB/s at {c['size_bytes']} B ({c['method']}); "
                      f"best busbw reached {100 * best:.1f}% of it")
    display.footer(console, r, doc["verdict"], summary_line(r))


def summary_line(r: dict) -> str:
    if not r["completed"]:
        return f"{r['backend']}: {display.failure_reason(r)}"
    avg = f"{r['avg_busbw_gbps']:.2f} GB/s" if r["avg_busbw_gbps"] is not None else "n/a"
    text = f"{r['backend']}: {len(r['rows'])} rows, #wrong {r['num_wrong_total']}, avg busbw {avg}"
    if r.get("spikes"):
        text += f", {len(r['spikes'])} spike(s): {spikes.FINDING}"
        if _host_only(r):
            text += f" ({spikes.HOST_NOTE.split(':')[0]})"
    if r["min_busbw_gbps"] is not None:
        text += f" (floor {r['min_busbw_gbps']} GB/s)"
    return text


def main(args, console) -> int:
    return display.finish(execute(args, console), render, args.json, console)
