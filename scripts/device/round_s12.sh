#!/usr/bin/env bash
# One GPU, the image's torch (2.11 with its NCCL), 2026-12-06 session 12, after the drills' device waits moved to
# platform.synchronize_device (torch.accelerator.synchronize before) and the trims of issue 30:
#   1. the drill script's own device path (no plan from ddplab: the device torch.accelerator names, its default
#      backend), one rank, healthy and with each fault that waits for the device (slow_compute, slow_device)
#   2. the full lab profile (round_one_gpu.sh part=full: PASS, then the SIGKILL test)
#   3. ddplab check
set -u
export PYTHONUNBUFFERED=1
res=/tmp/r; mkdir -p $res
python3 -m pip install -q --no-index --no-build-isolation --no-deps -e . > $res/pip.log 2>&1 || echo "pip failed"
python3 -c "import torch; print('torch', torch.__version__)"
python3 -c "import torch; from ddplab.platform import synchronize_device as s; s(torch.device(torch.accelerator.current_accelerator().type, 0)); print('synchronize_device: ok')"
for fault in none slow_compute slow_device; do
  start=$(date +%s%3N)
  timeout 120 python3 -m ddplab launch --nproc-per-node 1 --out $res/drill_$fault -m ddplab.drills.script --steps 60 \
    --fault $fault --victim 0 --fault-step 20 --slow-factor 1.5 > $res/drill_$fault.log 2>&1
  echo "drill script, one rank, fault $fault: rc=$? in $(( $(date +%s%3N) - start )) ms"
  grep -E "finished|Error|error" $res/drill_$fault.log | head -3
  cp $res/drill_$fault/report.json "$OUT/drill_${fault}_report.json" 2>/dev/null
done
part=full TAG=s12 bash scripts/device/round_one_gpu.sh 2>&1 | grep -v -i whl
start=$(date +%s%3N)
python3 -m ddplab check --out $res/check --format nagios --json "$OUT/check_report.json" > $res/check.nagios 2>$res/check.log
echo "check: rc=$? wall $(( $(date +%s%3N) - start )) ms"; head -c 300 $res/check.nagios; echo
ps -eo pid,ppid,etimes,args | grep -E "ddplab|nvidia-cuda-mps|torchrun" | grep -v -E "grep|defunct" || echo "nothing left running"
