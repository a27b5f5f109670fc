#!/usr/bin/env bash
# One device call with the image's own torch and NCCL (nothing carried), three parts, each under its own timeout:
#   1. `ddplab run --profile full` on the one GPU (scripts/device/one_gpu_full.sh): the lab's verdicts with the
#      drills injecting into the DDP workload;
#   2. `ddplab check` under its default deadline, RUNS times (scripts/device/check_deadline.sh with STOPS=0);
#   3. where the launch's step-time cost on one GPU comes from (scripts/device/overhead_parts_gpu.py, 1 rank).
# Results: $OUT/one_gpu_full.tgz, $OUT/check_deadline.tgz, $OUT/overhead_parts_gpu_1rank.json (+ .log).
set -u
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
t0=$SECONDS
RES=/tmp/r/full timeout 300 bash scripts/device/one_gpu_full.sh; echo "full part: rc=$? $((SECONDS - t0)) s"
t0=$SECONDS
RES=/tmp/r/check RUNS=${RUNS:-2} STOPS=0 timeout 120 bash scripts/device/check_deadline.sh
echo "check part: rc=$? $((SECONDS - t0)) s"
t0=$SECONDS
PYTHONPATH=$PWD/src timeout "${PARTS_S:-170}" python3 scripts/device/overhead_parts_gpu.py --nproc 1 \
  --rounds "${ROUNDS:-4}" --json "$OUT/overhead_parts_gpu_1rank.json" > "$OUT/overhead_parts_gpu_1rank.log" 2>&1
echo "overhead part: rc=$? $((SECONDS - t0)) s"; tail -6 "$OUT/overhead_parts_gpu_1rank.log"
ps -eo pid,etimes,args | grep -E "ddplab|spawn_main|nvidia-cuda-mps" | grep -v grep || echo "nothing left running"
