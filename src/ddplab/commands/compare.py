"""`ddplab compare A B`: put two sets of collective timings side by side.

Each of A and B is nccl-tests / rccl-tests / mccl-tests text output, or a ddplab JSON
document holding sweep rows (`ddplab sweep --json`, or `ddplab run`'s report). Rows are
matched on (collective, size, in-place); B is "new": a row where B's time is worse than
A's by more than --tolerance counts as a regression and the exit code is 1. A size of B far
off its own neighbours (spikes.py) is reported as a spike, apart from the regressions: a
finding to explain (WARN), not a slowdown of the whole stack.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import report, spikes
from ..config import check_number
from ..errors import ExitCode, UsageError

SUMMARY = "side by side: nccl-tests text or ddplab JSON, with regressions beyond a tolerance"
MAX_TOLERANCE_PCT = 10_000  # B a hundred times slower than A: beyond that a tolerance means nothing


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("old", metavar="A", help="baseline: nccl-tests text output or a ddplab JSON report")
    parser.add_argument("new", metavar="B", help="candidate: nccl-tests text output or a ddplab JSON report")
    parser.add_argument("--tolerance", default="5%", help="allowed slowdown of B against A (default: 5%%)")
    parser.add_argument("--min-size", default="0", help="ignore sizes below this in the verdict (default: 0)")
    parser.add_argument("--json", metavar="PATH", help="write the comparison as JSON")


def parse_tolerance(text: str) -> float:
    value = text.strip().rstrip("%")
    try:
        tol = float(value) / 100
    except ValueError:
        raise UsageError("invalid-tolerance", f'--tolerance "{text}" is not a percentage, e.g. 5%') from None
    check_number(tol * 100, "--tolerance", 0, MAX_TOLERANCE_PCT, unit="%", reference="invalid-tolerance")
    return tol


def validate(args) -> None:
    from ..sizes import parse_size

    parse_tolerance(args.tolerance)
    if args.min_size != "0":
        parse_size(args.min_size, "--min-size")
    for path in (args.old, args.new):
        if not Path(path).is_file():
            raise UsageError("no-such-file", f"{path} is not a file")


def load_rows(path: str) -> tuple[str, list[dict]]:
    """(what the file is, its rows as dicts with op, size_bytes, in_place, time_us, busbw_gbps, num_wrong)."""
    kind, rows, _ = load_input(path)
    return kind, rows


def load_input(path: str) -> tuple[str, list[dict], dict | None]:
    """(what the file is, its rows, the ddplab document when it is one). A file that is
    neither (binary, empty, broken JSON, a document of the wrong shape) is a UsageError
    naming the file and what is wrong with it."""
    from .. import nccl_tests, report_schema

    data = report_schema.read_bytes(path)
    if report_schema.looks_like_json(data):
        doc = report_schema.parse_document(data, path)
        rows = timed_rows(doc)
        if not rows:
            raise UsageError("nothing-timed", f"{path}: a ddplab {doc['command']} report with no timings")
        return "ddplab", rows, doc
    if b"\0" in data:
        raise UsageError("unreadable-input", f"{path} is a binary file: neither a ddplab JSON report nor "
                                             f"nccl-tests output")
    table = nccl_tests.parse(data.decode("utf-8", errors="replace"))
    if not table.rows:
        raise UsageError("unreadable-input", f"{path}: neither a ddplab JSON report nor nccl-tests output "
                                             f"(no table rows found)")
    return "nccl-tests", [r.to_dict() for r in table.rows], None


def timed_rows(doc: dict, stage: str | None = None) -> list[dict]:
    """Every timing a report holds, as comparable rows keyed by (op, size_bytes, in_place).

    sweep rows keep their collective name (so nccl-tests output lines up with them); a
    storm becomes op "storm" (its pipelined mean), a train run op "train" (step p50).
    Inside a `ddplab run` report, stages other than the main one are prefixed "stage:".
    """
    results = doc.get("results") or {}
    command = doc.get("command")
    prefix = f"{stage}:" if stage and stage != command else ""
    if command == "run":
        return [r for st in results.get("stages", []) if st.get("report")
                for r in timed_rows(st["report"], st["name"])]
    if command == "sweep":
        return [{**r, "op": prefix + r["op"]} for r in results.get("rows", []) if r.get("time_us")]
    if command == "storm" and results.get("completed"):
        return [{"op": f"{prefix}storm", "size_bytes": doc["config"]["bytes"], "in_place": True,
                 "time_us": results["mean_us"], "busbw_gbps": None}]
    if command == "train" and results.get("completed"):
        return [{"op": f"{prefix}train", "size_bytes": 0, "in_place": True,
                 "time_us": results["step_time_us"]["p50"], "busbw_gbps": None}]
    return []


def verdict_changes(old: dict, new: dict) -> list[dict]:
    """Stages of two `ddplab run` reports whose verdict got worse."""
    rank = {"pass": 0, "skip": 0, "warn": 1, "fail": 2}
    before = {s["name"]: s["verdict"] for s in (old.get("results") or {}).get("stages", [])}
    after = {s["name"]: s["verdict"] for s in (new.get("results") or {}).get("stages", [])}
    return [{"stage": n, "old": before[n], "new": v} for n, v in after.items()
            if n in before and rank.get(v, 2) > rank.get(before[n], 2)]


def compare(old: list[dict], new: list[dict], tolerance: float, min_size: int) -> list[dict]:
    """Matched rows; a row that is a spike in B carries ``spike`` and is not counted as a regression."""
    index = {(r["op"], r["size_bytes"], r["in_place"]): r for r in old}
    spiked = {spikes.spike_key(x): x for x in spikes.find_spikes(new)}
    out = []
    for r in new:
        key = (r["op"], r["size_bytes"], r["in_place"])
        base = index.get(key)
        if base is None or not base.get("time_us") or not r.get("time_us"):
            continue
        change = r["time_us"] / base["time_us"] - 1
        spike = spiked.get(key)
        judged = r["size_bytes"] >= min_size
        out.append({"op": r["op"], "size_bytes": r["size_bytes"], "in_place": r["in_place"],
                    "old_time_us": base["time_us"], "new_time_us": r["time_us"],
                    "old_busbw_gbps": base.get("busbw_gbps"), "new_busbw_gbps": r.get("busbw_gbps"),
                    "time_change": change,
                    "regression": judged and change > tolerance and spike is None,
                    "spike": spike is not None,
                    "spike_factor": spike["factor"] if spike else None,
                    "new_wrong": bool(r.get("num_wrong"))})
    return out


def table_text(rows: list[dict], old_label: str, new_label: str) -> str:
    lines = [f"# A = {old_label}   B = {new_label}   (time in us, busbw in GB/s, change = B/A - 1)",
             f"# {'op':<14} {'size (B)':>12} {'place':>6} {'A time':>10} {'B time':>10} {'change':>8} "
             f"{'A busbw':>8} {'B busbw':>8}"]
    for r in rows:
        flag = "  <- slower" if r["regression"] else ""
        if r.get("spike"):
            flag = f"  <- spike in B: {r['spike_factor']:.1f}x its neighbours"
        lines.append(f"  {r['op']:<14} {r['size_bytes']:>12} {'in' if r['in_place'] else 'out':>6} "
                     f"{r['old_time_us']:>10.2f} {r['new_time_us']:>10.2f} {100 * r['time_change']:>7.1f}% "
                     f"{_bw(r['old_busbw_gbps'])} {_bw(r['new_busbw_gbps'])}{flag}")
    return "\n".join(lines)


def _bw(v) -> str:
    return f"{v:>8.2f}" if v is not None else f"{'n/a':>8}"


def main(args, console) -> int:
    from ..sizes import parse_size

    tolerance = parse_tolerance(args.tolerance)
    min_size = parse_size(args.min_size, "--min-size") if args.min_size != "0" else 0
    kind_a, rows_a, doc_a = load_input(args.old)
    kind_b, rows_b, doc_b = load_input(args.new)
    rows = compare(rows_a, rows_b, tolerance, min_size)
    changes = []
    if kind_a == kind_b == "ddplab":
        changes = verdict_changes(doc_a, doc_b)
    if not rows and not changes:
        raise UsageError("nothing-to-compare", f"no (collective, size, placement) appears in both {args.old} and "
                                               f"{args.new}")
    console.print(table_text(rows, f"{kind_a} {args.old}", f"{kind_b} {args.new}"), markup=False, highlight=False,
                  soft_wrap=True)
    for c in changes:
        console.print(f"verdict of stage {c['stage']} changed: {c['old'].upper()} -> {c['new'].upper()}")
    regressions = [r for r in rows if r["regression"]]
    spiked = [r for r in rows if r["spike"] and r["size_bytes"] >= min_size]
    wrong = [r for r in rows if r["new_wrong"]]
    verdict = "fail" if regressions or wrong or changes else "warn" if spiked else "pass"
    if spiked:
        console.print(f"{len(spiked)} spike(s) in B, not counted as slower: {spikes.FINDING}")
    console.print(f"{len(rows)} rows compared, {len(regressions)} slower than A by more than "
                  f"{100 * tolerance:g}%, {len(spiked)} spike(s) in B, {len(wrong)} with wrong data in B, "
                  f"{len(changes)} verdict(s) worse: {verdict.upper()}")
    if args.json:
        doc = report.document("compare", {"old": args.old, "new": args.new, "tolerance": tolerance,
                                          "min_size": min_size}, None, {"rows": rows, "verdict_changes": changes},
                              verdict)
        report.write_json(doc, args.json)
    return ExitCode.CHECK_FAILED if verdict == "fail" else ExitCode.PASS
