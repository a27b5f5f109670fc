#!/usr/bin/env bash
# The GPU items issues 27 and 31 left, after scripts/device/nccl_carry.sh stashed NCCL 2.30.7's parts:
#   part=gil       assemble NCCL 2.30.7, copy it over torch's; the fault table's GIL row on DDP and FSDP2, 3 ranks
#                  sharing the GPU, REPEAT (3) runs each (the judge now reads a frozen heartbeat before torch's
#                  analyzer); then the 1-rank launch against torchrun, PAIRS1 (8) alternating pairs
#   part=three     3 ranks sharing the GPU, PAIRS3 (8) alternating pairs, the same-speed pairs apart
# Results under $OUT: fault_rows_{ddp,fsdp2}.json, overhead_gpu_1rank.json, overhead_gpu_3ranks.json.
set -u
export NCCL=/tmp/nccl/libnccl.so.2 PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
case "${part:-gil}" in
gil)
  bash scripts/device/nccl_carry.sh assemble || exit 1
  part=setup RES=/tmp/r/setup bash scripts/device/stragglers_gpu.sh 2>&1 | grep -v "^ *python" | head -8
  CODES="ddp fsdp2" CASES=gil REPEAT=${REPEAT:-3} timeout 330 bash scripts/device/fault_rows_nccl.sh
  timeout 200 python3 scripts/bench/launch_overhead.py --nproc 1 --pairs "${PAIRS1:-8}" \
    --json "$OUT/overhead_gpu_1rank.json" 2>&1 | tail -12
  ;;
three)
  NCCL_MULTI_RANK_GPU_ENABLE=1 timeout 540 python3 scripts/bench/launch_overhead.py --nproc 3 --pairs "${PAIRS3:-8}" \
    --timeout 90 --json "$OUT/overhead_gpu_3ranks.json" 2>&1 | tail -14
  ;;
esac
ps -eo pid,etimes,args | grep -E "ddplab|spawn_main|torch.distributed.run" | grep -v grep || echo "nothing left running"
