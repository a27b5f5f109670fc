#!/usr/bin/env bash
# The fault table's training rows on one GPU with NCCL, 3 ranks sharing the GPU (NCCL >= 2.30 with
# NCCL_MULTI_RANK_GPU_ENABLE=1, the variable round_one_gpu.sh sets once it copied 2.30.x over the venv's):
#   CODES="ddp fsdp2" REPEAT=1 bash scripts/device/fault_rows_nccl.sh
# writes $OUT/fault_rows_<code>.json (every run, judged) and prints the table. The rows are the faults users meet
# in training (drills/fault_table.py, the cases run on every code); the hang timeout is 10 s, as in the earlier GPU
# rounds (NCCL builds its communicators lazily: the first collective of 3 ranks on one GPU takes seconds).
set -u
export PYTHONUNBUFFERED=1 NCCL_MULTI_RANK_GPU_ENABLE=1
cases=${CASES:-}
[ -n "$cases" ] || cases=$(python3 -c "from ddplab.drills import fault_table as t; print(','.join(c.name for c in t.CASES if 'fsdp2' in c.codes or c.name == 'param_mismatch'))")
for code in ${CODES:-ddp fsdp2}; do
  timeout 560 python3 scripts/fault_table.py --ranks 3 --repeat "${REPEAT:-1}" --hang-timeout 10 --codes "$code" \
      --cases "$cases" --out "/tmp/r/ft_$code" 2>&1 | grep -v "^|---" | tail -40
  cp "/tmp/r/ft_$code/runs.json" "$OUT/fault_rows_$code.json" 2>/dev/null
done
ps -eo pid,etimes,args | grep -E "ddplab|nvidia-cuda-mps" | grep -v grep || echo "nothing left running"
