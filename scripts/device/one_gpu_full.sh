#!/usr/bin/env bash
# A one-GPU full-profile lab report for docs/ (issue 21's one-GPU screenshot): `ddplab run --profile full` on ONE
# GPU, the report and its page brought back; then, on a machine with 2+ GPUs, a hung `ddplab launch` (NCCL, one rank
# per GPU as examples/_common.py places them: its flight records carry start and completion times, which gloo's
# lack) for the hang timeline. Expected: run.json with the full profile's
# stages (2 ranks on one GPU); launch_hang/report.json with outcome "hung", culprit rank 1, both ranks' flight.json,
# and report.trace.json beside report.html whose X events have durations from the recorder's own completion times.
# After it: copy run.json to docs/results/1xh200-full/report.json and run `python scripts/screenshots.py` (CPU).
# Usage (device machine, repo root): bash scripts/device/one_gpu_full.sh
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
t0=$SECONDS
CUDA_VISIBLE_DEVICES=0 $py -m ddplab run --profile full --out "$res/run" > "$res/run.log" 2>&1
echo "run --profile full: rc=$? $((SECONDS - t0))s"; tail -3 "$res/run.log"
cp "$res/run/report.json" "$res/run.json" 2>/dev/null
if [ "$($py -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ]; then
  $py -m ddplab launch --nproc-per-node 2 --hang-timeout 10 --out "$res/launch_hang" -- examples/user_deadlock.py \
    --steps 8 > "$res/launch_hang.log" 2>&1
  echo "launch user_deadlock: rc=$? (1 expected: hung)"; tail -4 "$res/launch_hang.log"
  $py -m ddplab report "$res/launch_hang/report.json"  # writes report.html and report.trace.json beside it
else
  echo "one GPU: the NCCL hang needs two (examples/_common.py puts rank i on GPU i); skipped"
fi
leftovers
pack one_gpu_full
