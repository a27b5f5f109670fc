#!/usr/bin/env bash
# Issue 18, memory planning, on ONE H200 with the image's torch 2.11 / NCCL 2.28.9: 2 ranks on one GPU run gloo,
# which stages every device tensor through pinned host memory (before: each rank's RSS grew to 61 GB in `ddplab
# sweep` and the kernel killed one; measured.md "Third round").
#   sweep  `ddplab sweep`, 2 gloo ranks on the GPU, all_reduce and all_gather 1 MiB..1 GiB, -n 20 (20 calls in flight
#          per size) -w 1 -R 1: per size, the planned host bytes per rank, the RSS at its start and its peak (from the
#          report). Expected: the start RSS flat (about 0.7 GB) from the first size to the last; each peak under its
#          plan (all_gather 1 GiB: about 35 GB per rank, 20 x 1.5 GiB pinned + gloo's 2 x 1 GiB; planned 43 GB);
#          no rank killed; exit 0. Then the same with
#          DDPLAB_HOST_MEMORY_BUDGET=16G: the sizes over it SKIPPED with needed vs available, the others measured, exit 0.
#   full   `ddplab run --profile full`: PASS in under 300 s (its sweep stops at 64 MiB here, profiles.HOST_STAGED_MAX);
#          every stage's "peak host RSS" row printed; no ddplab process or MPS daemon left.
# About 3 minutes for `sweep`, 5 for `full`: run them as two device calls.
#   RES=/tmp/r/mem bash scripts/device/memory_plan.sh sweep     (then: ... memory_plan.sh full)
# Results: $OUT/memory_plan_<part>.tgz
source scripts/device/common.sh
part=${1:-sweep}

rows() {  # rows NAME: each size's plan and RSS from $res/NAME.json
  $py - "$res/$1.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
r, G = doc["results"], 1e9
print(f"{'op':<12} {'size':>11} {'place':<5} {'planned/rank':>13} {'start RSS':>10} {'peak RSS':>9}  skipped?")
for row in r["rows"]:
    g = lambda k: f"{row[k] / G:.2f} GB" if row.get(k) is not None else "-"
    print(f"{row['op']:<12} {row.get('size_bytes', 0):>11} {'in' if row.get('in_place') else 'out':<5} "
          f"{g('host_need_bytes'):>13} {g('start_rss_bytes'):>10} {g('peak_rss_bytes'):>9}  {row.get('skipped', '')}")
print("verdict", doc["verdict"], "| sampler peak RSS per rank:",
      {x["rank"]: round(x.get("peak_rss_bytes", 0) / G, 2) for x in r["ranks"]}, "GB | backend", r["backend"])
PY
}

echo "== machine"; free -g; cat /sys/fs/cgroup/memory.max 2>/dev/null
$py -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv

if [ "$part" = sweep ]; then
  step sweep_1g sweep --nproc 2 --ops all_reduce,all_gather -b 1M -e 1G -f 2 -n 20 -w 1 -R 1
  rows sweep_1g
  export DDPLAB_HOST_MEMORY_BUDGET=16G
  step sweep_budget sweep --nproc 2 --ops all_reduce,all_gather -b 1M -e 1G -f 2 -n 20 -w 1 -R 1
  unset DDPLAB_HOST_MEMORY_BUDGET
  rows sweep_budget
  grep -E "skipped|peak host RSS" "$res/sweep_budget.log" | head -20
elif [ "$part" = full ]; then
  t0=$SECONDS
  step run_full run --profile full --out "$res/full"
  echo "full profile: $((SECONDS - t0)) s (must be < 300)"
  $py - "$res/run_full.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
print("verdict", doc["verdict"])
for s in doc["results"]["stages"]:
    print(f"  {s['name']:<22} {s['verdict']:<5} {s.get('duration_s', '')!s:>7} s  {s['summary'][:110]}")
for c in doc["results"]["checks"]:
    if c["check"] in ("peak host RSS", "sizes the memory could hold") or c["verdict"] in ("fail", "warn"):
        print(f"  [{c['stage']}] {c['check']}: {c['verdict']}: {c['value'][:220]}")
PY
fi
leftovers
pack "memory_plan_$part"
