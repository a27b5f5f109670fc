#!/usr/bin/env bash
# One H200, after platform/cuda_client.py: the torch-free client alone (no daemon), then `ddplab check` twice, the
# first writing a baseline and the second held to it (issue 20: <= 30 s on 1-2 GPUs, PASS, a baseline compared).
source scripts/device/common.sh
$py -m pip install -q --no-index --no-build-isolation --no-deps -e . > "$res/pip.log" 2>&1 || echo "pip failed"
t0=$(date +%s%3N); $py -I src/ddplab/platform/cuda_client.py 0; echo "cuda_client.py 0: rc=$? in $(( $(date +%s%3N) - t0 )) ms"
export PROBE_LOG=$res/subprocesses.log PYTHONPATH=$PWD/scripts/device/probe:$PWD/src
for run in 1 2; do
  extra=(--write-baseline "$res/baseline.json"); [ $run = 2 ] && extra=(--baseline "$res/baseline.json" --tolerance 10%)
  t0=$(date +%s%3N); echo "check $run starts at $t0 ms" >> "$res/subprocesses.log"
  $py -m ddplab check --out "$res/check$run" --format nagios --json "$res/check$run.json" "${extra[@]}" \
    > "$res/check$run.nagios" 2> "$res/check$run.log"
  echo "check $run: rc=$? wall $(( $(date +%s%3N) - t0 )) ms :: ddplab check ${extra[*]}"; head -c 400 "$res/check$run.nagios"; echo
  $py -c "
import json, sys
r = json.load(open(sys.argv[1]))['results']
print('  ', r['status'], r['duration_s'], 's; stages:', ', '.join(f\"{s['name']} {s.get('duration_s')}\" for s in r['stages']))
" "$res/check$run.json"
done
grep -h "served\|not used" "$res"/check1.log | head -3
leftovers
mkdir -p "$OUT/r"; cp "$res"/check*.json "$res"/check*.nagios "$res"/baseline.json "$res"/subprocesses.log "$OUT/r/"
