#!/usr/bin/env bash
# 2x H200: every drill, one rank per GPU on NCCL; then the short set with 2 ranks sharing GPU 0.
source scripts/device/common.sh
step drills_2gpu_nccl drill all --per-device --timeout 10
step drill_torchrun_2gpu drill kill_launcher --launcher torchrun --per-device --timeout 10
CUDA_VISIBLE_DEVICES=0 step drills_shared_gpu0 drill short --share-device --timeout 10
leftovers
pack final_b
