#!/usr/bin/env bash
# Issue 2 on the device machine: env, shared-device train, per-device train, the main job,
# and the GPU tests. Results land in $OUT (the device tool brings them back).
# Usage (on the device machine, repo root): bash scripts/device/foundation.sh TAG
set -u
tag=${1:-gpu}
out=${OUT:-/tmp/ddplab-out}
mkdir -p "$out"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 COLUMNS=160
py=python3
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$py -m ddplab env --json "$out/env_$tag.json"; echo "env rc=$?"
$py -m ddplab train --nproc 2 --share-device --json "$out/train_shared_$tag.json"; echo "train shared rc=$?"
$py -m ddplab train --nproc 2 --share-device --backend nccl --json "$out/train_shared_nccl_forced_$tag.json"
echo "train shared forced-nccl rc=$?"
$py -m ddplab train --nproc 2 --share-device --model mlp --steps 50 --json "$out/train_shared_mlp_$tag.json"
echo "train shared mlp rc=$?"
if [ "$($py -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ]; then
  $py -m ddplab train --nproc 2 --per-device --json "$out/train_per_device_$tag.json"; echo "per-device rc=$?"
  $py -m ddplab train --nproc 2 --per-device --model mlp --steps 50 --json "$out/train_per_device_mlp_$tag.json"
  echo "per-device mlp rc=$?"
fi
$py -m ddplab run --out /tmp/ddplab-run-$tag > "$out/run_$tag.log" 2>&1; echo "run rc=$?"
cp /tmp/ddplab-run-$tag/report.json "$out/run_$tag.json"
$py -m pytest -m gpu tests/gpu -q -p no:cacheprovider 2>&1 | tail -15
ps -eo pid,ppid,cmd | grep -E "ddplab|spawn_main" | grep -v grep || echo "no ddplab processes left"
