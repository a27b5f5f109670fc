#!/usr/bin/env bash
# One H200 shared by several ranks (GPU 0 of the 2x machine): ceiling, storm, sweep and
# contention with and without a private MPS daemon; then the GPU tests.
source scripts/device/common.sh
export CUDA_VISIBLE_DEVICES=0
step ceiling_h200 ceiling --bytes 4G
step storm_shared_auto storm --nproc 2
step storm_shared_auto_mps storm --nproc 2 --mps
step storm_shared_nccl_forced storm --nproc 2 --backend nccl --iters 1000
step sweep_shared_auto sweep --nproc 2 -b 4 -e 1G -f 4
step sweep_shared_auto_mps sweep --nproc 2 -b 4 -e 1G -f 4 --mps
step contention_2 contention --nproc 2
step contention_2_mps contention --nproc 2 --mps
step contention_4 contention --nproc 4
step contention_4_mps contention --nproc 4 --mps
unset CUDA_VISIBLE_DEVICES
$py -m pytest -m gpu tests/gpu -q -p no:cacheprovider 2>&1 | tail -5
leftovers
pack part2
