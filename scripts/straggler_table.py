"""The straggler watch, measured for real through `ddplab launch` on the drills' DDP training (drills/script.py):
healthy runs that must name nobody, and runs with one rank slowed (drills/faults.py slow_compute, slow_loader) that
must name it (slow_device: a device that computes more while its host runs ahead, which only device times show),
with the time from the slowing to the naming.

    python scripts/straggler_table.py [--part healthy,detect] [--ranks 2,3,4] [--healthy-repeat 10]
                                      [--factors 1.2,1.3,1.5,2.0] [--loader-factors 1.3,1.5,2.0]
                                      [--device-factors 1.5]
                                      [--detect-repeat 1] [--seconds 60] [--out docs/results/stragglers]

Each healthy run trains for --seconds; each slowed run for 10 s more (the victim, the last rank, measures its step
over its 20 steps before --fault-step, then slows: from step 200 about 4 s into training on CPU, before the ranks'
reads slow down to their cadence; a later --fault-step tests the cadence they settle at). Writes <out>/runs.json after
every run (so that a long table interrupted keeps what it measured; --work holds the jobs' directories) and
<out>/table.md, and prints the table. ddplab's own device (the
machine's default backend) runs the ranks; scripts/device/stragglers_gpu.sh runs the same table on one GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ddplab.basics.files import write_text_atomic

ROOT = Path(__file__).resolve().parents[1]
FAULT_STEP = 200
MARGIN_S = 15  # beyond the training time: imports, rendezvous, the report


def launch(nproc: int, out: Path, seconds: float, fault: str = "none", factor: float = 1.0,
           fault_step: int = FAULT_STEP, extra_env: dict | None = None) -> dict:
    """One job; what the table needs from its report and its ranks' files."""
    victim = nproc - 1
    command = [sys.executable, "-m", "ddplab", "launch", "--nproc-per-node", str(nproc), "--out", str(out), "-m",
               "--", "ddplab.drills.script", "--steps", "100000000", "--seconds", str(seconds), "--fault", fault,
               "--victim", str(victim), "--fault-step", str(fault_step), "--slow-factor", str(factor)]
    load = os.getloadavg()[0]
    started = time.time()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=seconds + 240,
                          env={**os.environ, **(extra_env or {})})
    row = {"nproc": nproc, "fault": fault, "factor": factor, "victim": victim if fault != "none" else None,
           "fault_step": fault_step if fault != "none" else None,
           "exit": done.returncode, "load_before": round(load, 2), "wall_s": round(time.time() - started, 1),
           "out": str(out)}
    try:
        report = json.loads((out / "report.json").read_text())["results"]
    except (OSError, ValueError):
        return {**row, "error": (done.stdout + done.stderr)[-1500:]}
    found = report.get("stragglers") or {}
    findings = found.get("findings") or []
    row.update(status=found.get("status"), why=found.get("why"), basis=found.get("basis"),
               collectives=found.get("collectives"), every_s=found.get("every_s"), read_cost_s=found.get("read_cost_s"),
               named=[f["rank"] for f in findings],
               findings=[{k: f[k] for k in ("rank", "since", "until", "last_share", "wait_share", "cost_fraction")}
                         for f in findings])
    row["step_ms"] = _step_ms(out, nproc)
    if fault != "none":
        status = json.loads((out / "ranks" / str(victim) / "status.json").read_text())
        row["injected"], row["injected_at"] = status.get("injected"), status.get("injected_at")
        first = next((f for f in findings if f["rank"] == victim), None)
        row["named_after_s"] = round(first["since"] - row["injected_at"], 1) if first and row["injected_at"] else None
    return row


def _step_ms(out: Path, nproc: int) -> float | None:
    """Rank 0's training loop, per step (its interval sleep included)."""
    try:
        result = json.loads((out / "ranks" / "0" / "drill-result.json").read_text())
    except (OSError, ValueError):
        return None
    steps = len(result.get("latencies_us") or [])
    return round(1000 * result["loop_s"] / steps, 2) if steps and result.get("loop_s") else None


def table(runs: list[dict]) -> str:
    lines = ["| runs | ranks | slowed | ranks named | named after (s) | step (ms) | basis | read every (s) | "
             "read cost (ms) | load |", "|---|---|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        groups.setdefault((r["fault"], r["factor"], r["nproc"], r.get("fault_step") or 0), []).append(r)
    for (fault, factor, nproc, step), rows in sorted(groups.items(), key=lambda kv: (kv[0][0] != "none", kv[0])):
        slowed = "healthy" if fault == "none" else f"{fault} {factor:g}x (rank {nproc - 1}" + \
            (f", from step {step})" if step and step != FAULT_STEP else ")")
        names = [",".join(map(str, r.get("named") or [])) or "none" for r in rows]
        named = f"none in {len(rows)} runs" if set(names) == {"none"} and len(rows) > 1 else "; ".join(names)
        after = "; ".join("-" if r.get("named_after_s") is None else f"{r['named_after_s']:g}" for r in rows) \
            if fault != "none" else "-"
        steps = [r["step_ms"] for r in rows if r.get("step_ms")]
        lines.append(f"| {len(rows)} | {nproc} | {slowed} | {named} | {after} | "
                     f"{_spread(steps, 1)} | {rows[0].get('basis') or '-'} | "
                     f"{_spread([r.get('every_s') for r in rows])} | "
                     f"{_spread([1000 * r['read_cost_s'] for r in rows if r.get('read_cost_s')], 0)} | "
                     f"{_spread([r['load_before'] for r in rows], 1)} |")
    return "\n".join(lines)


def _spread(values: list, digits: int = 0) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    return f"{lo:.{digits}f}" if lo == hi else f"{lo:.{digits}f}-{hi:.{digits}f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", default="healthy,detect")
    parser.add_argument("--ranks", default="2,3,4")
    parser.add_argument("--healthy-repeat", type=int, default=10)
    parser.add_argument("--factors", default="1.2,1.3,1.5,2.0")
    parser.add_argument("--loader-factors", default="1.3,1.5,2.0")
    parser.add_argument("--device-factors", default="", help="slow_device: only a device's times show it")
    parser.add_argument("--detect-repeat", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--fault-step", type=int, default=FAULT_STEP,
                        help="the slowed rank's step at which it slows (200: about 4 s into training on CPU)")
    parser.add_argument("--out", default="docs/results/stragglers")
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "ddplab-straggler-table"),
                        help="where the jobs' directories go (not kept with the results)")
    args = parser.parse_args()
    out = Path(args.out)
    runs_file = out / "runs.json"
    runs = json.loads(runs_file.read_text()) if runs_file.exists() else []
    ranks = [int(n) for n in args.ranks.split(",")]
    plan = []
    if "healthy" in args.part:
        plan += [("none", 1.0, n, i) for i in range(args.healthy_repeat) for n in ranks]
    if "detect" in args.part:
        cases = [("slow_compute", float(f)) for f in args.factors.split(",") if f] + \
                [("slow_loader", float(f)) for f in args.loader_factors.split(",") if f] + \
                [("slow_device", float(f)) for f in args.device_factors.split(",") if f]
        plan += [(fault, factor, n, i) for i in range(args.detect_repeat) for n in ranks for fault, factor in cases]
    for fault, factor, nproc, i in plan:
        tag = f"{fault}-{factor:g}x-{nproc}r-{i}-{time.strftime('%H%M%S')}"
        seconds = args.seconds if fault == "none" else args.seconds + 10  # the victim measures its step first
        row = launch(nproc, Path(args.work) / tag, seconds, fault, factor, args.fault_step)
        runs.append(row)
        write_text_atomic(runs_file, json.dumps(runs, indent=1), make_parents=True)
        print(f"{time.strftime('%H:%M:%S')} {tag}: named {row.get('named')} after {row.get('named_after_s')} s, "
              f"step {row.get('step_ms')} ms, load {row['load_before']}, exit {row['exit']}", flush=True)
    text = table(runs)
    write_text_atomic(out / "table.md", text + "\n", make_parents=True)
    print(text)
    healthy_named = [r for r in runs if r["fault"] == "none" and r.get("named")]
    missed = [r for r in runs if r["fault"] != "none" and r["factor"] >= 1.3
              and (r.get("named_after_s") is None or r["named_after_s"] > 60 or r.get("named") != [r["victim"]])]
    print(f"healthy runs with a rank named: {len(healthy_named)}; slowed >= 1.3x not named alone within 60 s: "
          f"{len(missed)}")
    return 0 if not healthy_named and not missed else 1


if __name__ == "__main__":
    sys.exit(main())
