#!/usr/bin/env bash
# Issue 20 on one H200 (kind nvidia-h200): `ddplab check` PASSes within 30 s, writes a baseline, and a second run
# is held to it; every runner's output kept. On a 2-GPU machine it also checks both GPUs (one rank per GPU).
#
# prometheus_client is a dependency of ddplab check --textfile-dir; the device machine reaches no index, so carry
# a wheel: here, `pip download prometheus_client -d wheels/` (untracked, not ignored: it travels with the tree).
source scripts/device/common.sh
if ! $py -c "import prometheus_client" 2>/dev/null; then
  $py -m pip install -q --no-index --find-links "${WHEELS:-wheels}" prometheus_client 2>&1 | tail -1
fi
textfile=()
if $py -c "import prometheus_client" 2>/dev/null; then textfile=(--textfile-dir "$res/textfile"); else
  echo "prometheus_client missing: the textfile is skipped"; fi
$py -c "import tomllib" 2>/dev/null || $py -m pip install -q --no-index --find-links "${WHEELS:-wheels}" tomli 2>&1 | tail -1
nvidia-smi -L

check() {  # check NAME ARGS...: one `ddplab check`, its status line, exit code and wall time
  local name=$1; shift
  local t0=$SECONDS
  $py -m ddplab check --out "$res/$name" --format nagios --junit "$res/$name.junit.xml" --json "$res/$name.json" \
    "$@" > "$res/$name.nagios" 2> "$res/$name.log"
  local rc=$?
  echo "$name: rc=$rc wall $((SECONDS - t0)) s :: ddplab check $*"
  head -1 "$res/$name.nagios" | cut -c1-600
}

# 1. One GPU: the acceptance check, PASS (Nagios OK, rc 0) in <= 30 s; its report is the baseline.
CUDA_VISIBLE_DEVICES=0 check check_1gpu "${textfile[@]}" --write-baseline "$res/baseline_1gpu.json"
[ -n "${textfile[*]}" ] && cp "$res/textfile/ddplab_check.prom" "$res/check_1gpu.prom"
# 2. Again, held to that baseline (WARNING beyond 10%, CRITICAL beyond 30%) and to the example thresholds file.
CUDA_VISIBLE_DEVICES=0 check check_1gpu_vs_baseline --baseline "$res/baseline_1gpu.json" --tolerance 10% \
  --critical-tolerance 30% --thresholds examples/fleet/thresholds.toml
# 3. The second run judged again at 5% (no GPU): how far two runs on one GPU are apart, row by row.
$py -m ddplab check --from-report "$res/check_1gpu_vs_baseline/report.json" --baseline "$res/baseline_1gpu.json" \
  --tolerance 5% > "$res/rejudged_5pct.txt" 2>&1; echo "rejudged at 5%: rc=$?"; tail -1 "$res/rejudged_5pct.txt"
# 4. Every GPU of the machine (2 on nvidia-h200-x2: one rank per GPU, 256 MiB sweeps), <= 30 s.
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  check check_allgpus --write-baseline "$res/baseline_allgpus.json"
fi
# 5. A degraded node on the GPU, by injection: CRITICAL (Nagios rc 2) naming the leftover and the wrong row.
CUDA_VISIBLE_DEVICES=0 check check_1gpu_injected --inject leftover --inject slow:all_gather --inject wrong:all_reduce
for f in "$res"/check_*/report.json; do
  $py - "$f" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); r = d["results"]
stages = ", ".join(f"{s['name']} {s.get('duration_s')}" for s in r["stages"])
print(f"{sys.argv[1]}: {r['status']} in {r['duration_s']} s; machine {r['machine']}; stages (s): {stages}")
m = r["metrics"]
top = {}
for b in m["busbw"]:
    k = (b["op"], b["in_place"])
    if k not in top or b["size_bytes"] > top[k]["size_bytes"]:
        top[k] = b
print("  busbw at the largest size:", "; ".join(f"{op} {'in' if ip else 'out'} {b['size_bytes']} B {b['busbw_gbps']:.1f} GB/s"
                                            for (op, ip), b in sorted(top.items())))
print(f"  storm mean {m['latency']['mean_us']:.1f} us, p99 {m['latency']['p99_us']:.0f} us; copy {m['copy_ceiling_gbps']:.0f} GB/s")
PY
done
leftovers
pack check_h200
