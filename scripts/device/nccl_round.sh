#!/usr/bin/env bash
# One device call with NCCL 2.30.7 carried (NCCL=/tmp/nccl/libnccl.so.2, after scripts/device/nccl_carry.sh), 3 ranks
# sharing the one GPU:
#   round=a  the fault table's remaining training rows on NCCL (uneven, exit, segv, param_mismatch, gil,
#            ctrl_c_plain; DDP and FSDP2), then HEALTHY_REPEAT (8) healthy straggler-watch runs of SECONDS_PER_RUN (20)
#   round=b  the straggler watch's cost (stragglers_gpu.sh part=cost), then launch_overhead.py at 3 ranks
# Results under $OUT (fault_rows_<code>.json, healthy_b-*, cost_gpu_*.json, overhead_gpu_3ranks.json).
set -u
export NCCL=${NCCL:-/tmp/nccl/libnccl.so.2} SECONDS_PER_RUN=${SECONDS_PER_RUN:-20}
case "${round:-a}" in
a)
  mkdir -p /tmp/r; part=setup RES=/tmp/r/setup bash scripts/device/stragglers_gpu.sh > /tmp/r/setup.log 2>&1  # NCCL over torch's
  grep -v "python" /tmp/r/setup.log | head -8
  python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
  CASES=uneven,exit,segv,param_mismatch,gil,ctrl_c_plain PYTHONPATH=$PWD/src timeout 330 \
    bash scripts/device/fault_rows_nccl.sh
  TABLE_TIMEOUT=240 HEALTHY_REPEAT=${HEALTHY_REPEAT:-8} RUN=b part=healthy bash scripts/device/stragglers_gpu.sh
  ;;
b)
  part=cost bash scripts/device/stragglers_gpu.sh
  NCCL_MULTI_RANK_GPU_ENABLE=1 PYTHONPATH=$PWD/src timeout 200 python3 scripts/bench/launch_overhead.py --nproc 3 \
    --pairs "${PAIRS:-4}" --json "$OUT/overhead_gpu_3ranks.json" 2>&1 | tail -8
  ;;
esac
ps -eo pid,etimes,args | grep -E "ddplab|spawn_main|nvidia-cuda-mps" | grep -v grep || echo "nothing left running"
