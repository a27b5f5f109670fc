#!/usr/bin/env bash
# What the 2-GPU machine allows of issue 6: 2 ranks per GPU across both GPUs, 8 ranks on one
# GPU with MPS, and drills among 8 ranks.
source scripts/device/common.sh
step train_spread_4 train --nproc 4 --spread
step storm_spread_4 storm --nproc 4 --spread
step sweep_spread_4 sweep --nproc 4 --spread -b 8 -e 64M -f 8
CUDA_VISIBLE_DEVICES=0 step train_shared_8_mps train --nproc 8 --share-device --mps
CUDA_VISIBLE_DEVICES=0 step storm_shared_8_mps storm --nproc 8 --share-device --mps --iters 2000
step drill_stall_8_spread drill stall --nproc 8 --spread --timeout 10
step drill_kill_rank_8_spread drill kill_rank --nproc 8 --spread --timeout 10
leftovers
pack scale
