#!/usr/bin/env bash
# One H200, the image's torch (2.11, NCCL 2.28.9), 2026-12-02 after issue 19's third shrink round and the torch-free
# MPS client (platform/cuda_client.py):
#   1. what the beacon's status read costs a rank, with and without NCCL's blocking wait (fr_dump_cost.py)
#   2. the full lab profile (round_one_gpu.sh part=full: PASS, then the SIGKILL test)
#   3. ddplab check once more
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-build-isolation --no-deps -e . > /tmp/pip.log 2>&1 || echo "pip failed"
for bw in 1 0; do
  TORCH_NCCL_BLOCKING_WAIT=$bw timeout 120 torchrun --nproc-per-node 1 scripts/device/fr_dump_cost.py 2>&1 | grep -E "fr_dump_cost|Error" | tee -a "$OUT/fr_dump_cost.txt"
done
part=full TAG=stock bash scripts/device/round_one_gpu.sh 2>&1 | grep -v -i whl
start=$(date +%s%3N)
python3 -m ddplab check --out /tmp/r/check --format nagios --json "$OUT/check_report.json" > /tmp/r/check.nagios 2>/tmp/r/check.log
echo "check: rc=$? wall $(( $(date +%s%3N) - start )) ms"; head -c 300 /tmp/r/check.nagios; echo
python3 -c "
import json; r = json.load(open('$OUT/check_report.json'))['results']
print(r['status'], r['duration_s'], 's:', ', '.join(f\"{s['name']} {s.get('duration_s')}\" for s in r['stages']))"
ps -eo pid,ppid,etimes,args | grep -E "ddplab|nvidia-cuda-mps|torchrun" | grep -v -E "grep|defunct" || echo "nothing left running"
