#!/usr/bin/env bash
# Issue 29 on one GPU: the straggler watch with NCCL, 3 ranks sharing the GPU (NCCL >= 2.30 with
# NCCL_MULTI_RANK_GPU_ENABLE=1; NCCL=/tmp/nccl/libnccl.so.2 copies a carried 2.30.x over the venv's first, as
# scripts/device/round_one_gpu.sh does: ../shared/reference/measured.md, "How NCCL 2.30.7 was loaded").
# Each part fits one device call (10 minutes); SECONDS_PER_RUN shortens the runs (default 40 s of training).
#   part=probe    what the NCCL recorder fills in: one 3-rank launch with a slow device rank (slow_device 1.5x),
#                 then a dump of rank 0's entries (time_created_ns, duration_ms, time_discovered_*): ~1 min
#   part=cost     the watch's cost: scripts/bench/straggler_cost.py --nproc 3, 4 pairs at its own cadence, then
#                 2 pairs reading every second (the stress run): ~8 min at 40 s a run
#   part=healthy  HEALTHY_REPEAT (5) healthy runs of 3 ranks: ~1 min each
#   part=detect   one rank of 3 slowed: slow_compute 1.3x, 1.5x, 2x (host waits for its device), slow_device 1.5x
#                 (its device alone is slow: only device times show it), slow_loader 1.5x: ~6 min
#   part=untimed  slow_device 1.5x with TORCH_NCCL_ENABLE_TIMING=0 set by the user (enqueue times only: expected
#                 not named, the limit docs/supervision.md states), and slow_compute 1.5x the same way: ~2.5 min
# Results: $OUT/<part>.json (+ .log); runs.json/table.md of scripts/straggler_table.py for healthy and detect.
RES=${RES:-/tmp/r} source scripts/device/common.sh
secs=${SECONDS_PER_RUN:-40}
[ -d .whl ] && python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PYTHONPATH
$py -m pip install -q --no-index --no-build-isolation --no-deps -e . > "$res/pip.log" 2>&1 || echo "pip failed"
nccl_over_torchs
export NCCL_MULTI_RANK_GPU_ENABLE=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$py -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
$py -c "import ctypes, torch; v=ctypes.c_int(); ctypes.CDLL('libnccl.so.2').ncclGetVersion(ctypes.byref(v)); print('libnccl.so.2 loaded by name:', v.value)" 2>&1 | tail -1
table() {  # table NAME ARGS...: scripts/straggler_table.py into $res/NAME, its runs and table to $OUT
  local name=$1; shift
  timeout "${TABLE_TIMEOUT:-590}" $py scripts/straggler_table.py --ranks 3 --seconds "$secs" --out "$res/$name" --work "$res/$name-jobs" "$@" \
    > "$res/$name.log" 2>&1
  echo "$name: rc=$?"; tail -14 "$res/$name.log"
  cp "$res/$name/runs.json" "$OUT/$name-runs.json" 2>/dev/null; cp "$res/$name/table.md" "$OUT/$name-table.md" 2>/dev/null
  cp "$res/$name.log" "$OUT/" 2>/dev/null
}
case "${part:-probe}" in
setup)  # only the install and NCCL copy above
  ;;
probe)
  timeout 200 $py -m ddplab launch --nproc-per-node 3 --out "$res/probe" -m -- ddplab.drills.script --steps 100000000 \
    --seconds 20 --fault slow_device --victim 2 --fault-step 200 --slow-factor 1.5 > "$res/probe.log" 2>&1
  echo "probe launch: rc=$?"; grep -E "straggler|SUCCEEDED|FAILED|HUNG" "$res/probe.log" | tail -6
  $py - "$res/probe" > "$OUT/probe.json" <<'PY'
import json, pathlib, sys
job = pathlib.Path(sys.argv[1])
report = json.loads((job / "report.json").read_text())["results"]
out = {"stragglers": report.get("stragglers"), "arrivals": {}}
for f in sorted(job.glob("ranks/*/arrivals.json")):
    a = json.loads(f.read_text())
    out["arrivals"][f.parent.name] = {k: a[k] for k in ("recorder", "every_s", "read_cost_s", "unavailable") if k in a}
    g = next(iter(a["groups"].values()), {})
    out["arrivals"][f.parent.name]["last_10"] = {k: (g.get(k) or [])[-10:] for k in ("seqs", "created_us", "device_us")}
print(json.dumps(out, indent=1, default=str))
PY
  $py -c "import json,sys; d=json.load(open(sys.argv[1])); s=d['stragglers'] or {}; print(s.get('status'), s.get('basis'), [f['rank'] for f in s.get('findings', [])]); [print(r, v) for r, v in d['arrivals'].items()]" "$OUT/probe.json"
  cp "$res/probe.log" "$OUT/"
  ;;
cost)
  timeout 400 $py scripts/bench/straggler_cost.py --nproc 3 --seconds "$secs" --pairs 4 --json "$OUT/cost_gpu_default.json" \
    2>&1 | tail -6
  timeout 190 $py scripts/bench/straggler_cost.py --nproc 3 --seconds "$secs" --pairs 2 --every 1 \
    --json "$OUT/cost_gpu_every_1s.json" 2>&1 | tail -4
  ;;
healthy)
  table healthy_${RUN:-a} --part healthy --healthy-repeat "${HEALTHY_REPEAT:-5}"
  ;;
detect)
  table detect --part detect --factors 1.3,1.5,2.0 --loader-factors 1.5 --device-factors 1.5
  ;;
untimed)
  export TORCH_NCCL_ENABLE_TIMING=0  # the user's own setting: ranks keep it, so only enqueue times are there
  table untimed --part detect --factors 1.5 --loader-factors "" --device-factors 1.5
  ;;
esac
ps -eo pid,etimes,args | grep -E "ddplab|spawn_main" | grep -v grep || echo "nothing left running"
