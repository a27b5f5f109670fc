#!/usr/bin/env bash
# 2x H200: issue 2's per-device runs and issue 3's one-rank-per-GPU NCCL benchmarks.
source scripts/device/common.sh
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
nvidia-smi topo -m | head -4
find / -name "libnccl.so*" -not -path "/proc/*" 2>/dev/null | head -5
step env_2xh200 env
step train_per_device_2xh200 train --nproc 2 --per-device
step train_per_device_mlp_2xh200 train --nproc 2 --per-device --model mlp --steps 50
CUDA_VISIBLE_DEVICES=0 step train_shared_mlp_gpu0 train --nproc 2 --share-device --model mlp --steps 50
for i in a b c; do
  step storm_2gpu_nccl_$i storm --nproc 2 --per-device
  step storm_2gpu_nccl_nosample_$i storm --nproc 2 --per-device --no-sample
done
step sweep_2gpu_all_reduce sweep --nproc 2 --per-device -b 4 -e 4G -f 2
step sweep_2gpu_all_reduce_blocking sweep --nproc 2 --per-device -b 4 -e 16M -f 4 --mode blocking
step sweep_2gpu_all_ops sweep --nproc 2 --per-device --ops all -b 8 -e 256M -f 4
step run_2xh200 run --out /tmp/ddplab-run-2xh200
cp /tmp/ddplab-run-2xh200/report.json "$res/run_2xh200_report.json"
leftovers
pack part1
