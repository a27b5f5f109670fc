#!/usr/bin/env bash
# 2x H200: re-check the gradient proof and the async pipelined sweep, then the full lab.
source scripts/device/common.sh
step train_per_device_mlp_2xh200 train --nproc 2 --per-device --model mlp --steps 50
CUDA_VISIBLE_DEVICES=0 step train_shared_mlp_gpu0 train --nproc 2 --share-device --model mlp --steps 50
step sweep_2gpu_all_reduce sweep --nproc 2 --per-device -b 4 -e 4G -f 2
step sweep_2gpu_all_reduce_blocking sweep --nproc 2 --per-device -b 4 -e 16M -f 4 --mode blocking
t0=$SECONDS
$py -m ddplab run --profile full --out "$res/full-2xh200" > "$res/run_full_2xh200.log" 2>&1
echo "run --profile full: rc=$? $((SECONDS - t0))s"; tail -3 "$res/run_full_2xh200.log"
leftovers
pack final_a
