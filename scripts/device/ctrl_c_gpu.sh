#!/usr/bin/env bash
# One H200, the image's torch and NCCL: Ctrl+C of `ddplab launch` (SIGINT to the launcher, then to its whole
# process group as a terminal sends it) while one NCCL rank idles in user code or runs all_reduces: interrupted,
# exit 130, no culprit, the rank ended by the launcher's teardown, nothing left.
set -u
python3 -m pip install -q --no-index --no-build-isolation --no-deps -e . > /tmp/pip.log 2>&1 || echo "pip failed"
script=$PWD/scripts/device/ctrl_c_gpu.py
for mode in idle busy; do
  for target in launcher group; do
    d=/tmp/cc/$mode-$target; rm -rf "$d"; mkdir -p "$d"; cd "$d"
    setsid python3 -m ddplab launch --nproc-per-node 1 --out "$d/job" "$script" $mode > out.txt 2>&1 & pid=$!
    for _ in $(seq 600); do [ -e ready.0 ] && break; sleep 0.1; done
    sleep 2
    if [ $target = launcher ]; then kill -INT $pid; else kill -INT -- -$pid; fi
    wait $pid; rc=$?
    python3 -c "
import json, sys; r = json.load(open('job/report.json'))['results']
print('$mode, SIGINT to the $target: exit', $rc, r['outcome'], 'culprit', r.get('culprit') and r['culprit']['reason'],
      [(x['rank'], x.get('ended_by')) for x in r['ranks']])"
    cp job/report.json "$OUT/$mode-$target.json"
    cd - > /dev/null
  done
done
ps -eo pid,ppid,etimes,args | grep -E "ddplab|ctrl_c_gpu" | grep -v -E "grep|defunct|ctrl_c_gpu.sh" || echo "nothing left running"
