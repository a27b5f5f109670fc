#!/usr/bin/env bash
# One H200, the image's torch (2.11, NCCL 2.28.9): what a user first tries (issues 17, 18, 20, 21).
#   part=full  bash scripts/device/round_one_gpu.sh   the full lab profile (must PASS in under 5 minutes), then the
#                                                    SIGKILL test (no rank, no sharing daemon 3 s later)
#   part=more  bash scripts/device/round_one_gpu.sh   ddplab check (<= 30 s) with a baseline, then held to it; the
#                                                    supervisor's cost on one rank (launch_overhead.py)
# NCCL=/tmp/nccl/libnccl.so.2 (optional): copied over the venv's libnccl first (docs: measured.md), 2.30.x then.
set -u
py=python3
res=/tmp/r; mkdir -p $res  # the runs; a few files are copied to $OUT at the end (it takes 8 files at most)
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
$py -m pip install -q --no-index --no-build-isolation --no-deps -e . > "$res/pip.log" 2>&1 || echo "pip failed"
if [ -n "${NCCL:-}" ]; then
  root=$($py -c "import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))")
  for lib in $(find "$root" / -xdev -name 'libnccl.so*' -type f 2>/dev/null | grep -v "^/tmp/nccl" | sort -u); do
    cp "$NCCL" "$lib" && echo "NCCL copied over $lib"
  done
  $py -c "import ctypes, torch; v=ctypes.c_int(); ctypes.CDLL('libnccl.so.2').ncclGetVersion(ctypes.byref(v)); print('libnccl.so.2 loaded by name:', v.value)" 2>&1 | tail -1
  export NCCL_MULTI_RANK_GPU_ENABLE=1
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$py -c "import torch; print('torch', torch.__version__, 'nccl built', torch.cuda.nccl.version())"
tag=${TAG:-stock}
case "${part:-full}" in
full)
  start=$(date +%s)
  timeout 330 $py -m ddplab run --profile full --out "$res/full_$tag" > "$res/full_$tag.log" 2>&1
  echo "full profile ($tag): rc=$? in $(( $(date +%s) - start )) s"
  grep -E "^verdict|PASS|FAIL|WARN" "$res/full_$tag.log" | tail -25
  cp "$res/full_$tag/report.json" "$OUT/full_${tag}_report.json" 2>/dev/null; cp "$res/full_$tag.log" "$OUT/"
  timeout 200 $py -m pytest -q -p no:cacheprovider -o addopts= -m gpu tests/gpu/test_gpu_train.py -k "sigkill" -s 2>&1 | tail -8
  ;;
more)
  start=$(date +%s)
  timeout 90 $py -m ddplab check --out "$res/check_1" --format nagios --write-baseline "$res/baseline.json" > "$res/check_1.log" 2>&1
  echo "check 1: rc=$? in $(( $(date +%s) - start )) s"; cat "$res/check_1.log" | head -3
  start=$(date +%s)
  timeout 90 $py -m ddplab check --out "$res/check_2" --format nagios --baseline "$res/baseline.json" > "$res/check_2.log" 2>&1
  echo "check 2 (held to the baseline): rc=$? in $(( $(date +%s) - start )) s"; cat "$res/check_2.log" | head -3
  cp "$res/check_1/report.json" "$OUT/check_1_report.json" 2>/dev/null; cp "$res/check_2/report.json" "$OUT/check_2_report.json" 2>/dev/null
  timeout 240 $py scripts/bench/launch_overhead.py --nproc 1 --steps 200 --pairs 4 --json "$OUT/overhead_1rank_$tag.json" 2>&1 | tail -6
  ;;
esac
ps -eo pid,etimes,args | grep -E "ddplab|nvidia-cuda-mps" | grep -v grep || echo "nothing left running"
