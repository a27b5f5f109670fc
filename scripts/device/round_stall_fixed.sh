#!/usr/bin/env bash
# One H200, 2026-12-02, after the fix (platform/flight_recorder.py StatusReader): NCCL 2.30.7 travels in four parts
# again (round_stall.sh), one per call, back to back:
#   part=0  the recorder under blocking wait, one rank, the image's NCCL (blocking_wait_recorder.py), default too
#   part=1, part=2  only the library's parts
#   part=3  NCCL 2.30.7 joined and copied in; `ddplab drill stall` (both runs), then the full profile with it
set -u
mkdir -p /tmp/nccl /tmp/r
cp .nccl/part$part /tmp/nccl/ && echo "part$part kept in /tmp/nccl"
python3 -m pip install -q --no-index --no-build-isolation --no-deps -e . > /tmp/r/pip.log 2>&1 || echo "pip failed"
case $part in
0) for bw in 1 0; do TORCH_NCCL_BLOCKING_WAIT=$bw timeout 60 torchrun --nproc-per-node 1 scripts/device/blocking_wait_recorder.py 2>&1 | grep blocking_wait; done ;;
3) cat /tmp/nccl/part0 /tmp/nccl/part1 /tmp/nccl/part2 /tmp/nccl/part3 | python3 -c "import lzma, sys; sys.stdout.buffer.write(lzma.decompress(sys.stdin.buffer.read()))" > /tmp/nccl/libnccl.so.2
   echo "618968ee277041751512e619190132a9bdf351c3ce7129c73484f6ef441ad692  /tmp/nccl/libnccl.so.2" | sha256sum -c || exit 1
   NCCL=/tmp/nccl/libnccl.so.2 part=none TAG=nccl2307 bash scripts/device/round_one_gpu.sh 2>&1 | grep -v -i whl
   export NCCL_MULTI_RANK_GPU_ENABLE=1 PYTHONUNBUFFERED=1 LD_PRELOAD=/tmp/nccl/libnccl.so.2
   start=$(date +%s)
   timeout -s INT 120 python3 -m ddplab drill stall --hang-timeout 10 --victim 1 --run-dir /tmp/r/stall --json /tmp/r/stall.json > /tmp/r/stall.log 2>&1
   echo "drill stall: rc=$? in $(( $(date +%s) - start )) s"; grep -E "blocking|detected|culprit|verdict" /tmp/r/stall.log | head -12
   cp /tmp/r/stall.json "$OUT/stall_nccl2307.json"; cp /tmp/r/stall.log "$OUT/stall_nccl2307.log"
   ps -eo pid,etimes,args | grep -E "ddplab|drills|nvidia-cuda-mps" | grep -v -E "grep|round_stall" || echo "nothing left running"
   part=full TAG=nccl2307 bash scripts/device/round_one_gpu.sh 2>&1 | grep -v -i whl ;;
esac
