#!/usr/bin/env bash
# One H200, the last round of issues 17-18 (2026-12-01): the image's torch 2.11 with its NCCL 2.28.9, then NCCL
# 2.30.7 carried in four parts (docs: ../shared/reference/measured.md, "How NCCL 2.30.7 was loaded"), one per
# call, back to back while the machine stays warm:
#   step=1  part0; the full profile with the stock NCCL, then the SIGKILL test       (round_one_gpu.sh part=full)
#   step=2  part1; ddplab check twice (a baseline, then held to it), launch overhead (round_one_gpu.sh part=more)
#   step=3  part2; ddplab env
#   step=4  part3; NCCL 2.30.7 joined and copied over the venv's; issue 17's faults with NCCL, 3 ranks on the GPU
#   step=5  the full profile with NCCL 2.30.7
set -u
mkdir -p /tmp/nccl
n=$(( ${step} - 1 ))
[ -f .nccl/part$n ] && cp .nccl/part$n /tmp/nccl/ && echo "part$n kept in /tmp/nccl"
join() {  # the four parts -> /tmp/nccl/libnccl.so.2, checked against the hash of the library carried
  cat /tmp/nccl/part0 /tmp/nccl/part1 /tmp/nccl/part2 /tmp/nccl/part3 | python3 -c "import lzma, sys; sys.stdout.buffer.write(lzma.decompress(sys.stdin.buffer.read()))" > /tmp/nccl/libnccl.so.2
  echo "618968ee277041751512e619190132a9bdf351c3ce7129c73484f6ef441ad692  /tmp/nccl/libnccl.so.2" | sha256sum -c
}
case $step in
1) part=full TAG=stock bash scripts/device/round_one_gpu.sh ;;
2) part=more TAG=stock bash scripts/device/round_one_gpu.sh ;;
3) python3 -m pip install -q --no-index --no-build-isolation --no-deps -e . >/dev/null 2>&1; python3 -m ddplab env 2>&1 | tail -30 ;;
4) join || exit 1
   export NCCL=/tmp/nccl/libnccl.so.2 part=none TAG=nccl2307
   bash scripts/device/round_one_gpu.sh  # copies the library in, prints torch and NCCL
   export NCCL_MULTI_RANK_GPU_ENABLE=1 PYTHONUNBUFFERED=1 LD_PRELOAD=/tmp/nccl/libnccl.so.2
   python3 -c "import torch; torch.cuda.init(); print('nccl', torch.cuda.nccl.version()); print(sorted({l.split()[-1] for l in open('/proc/self/maps') if 'nccl' in l}))"
   timeout 500 python3 scripts/fault_table.py --ranks 3 --repeat 2 --hang-timeout 10 \
       --cases skip,mismatch,raise,exit,sigkill --out /tmp/r/ft_gpu 2>&1 | tail -30
   cp /tmp/r/ft_gpu/runs.json "$OUT/ft_gpu_runs.json"; cp /tmp/r/ft_gpu/table.md "$OUT/ft_gpu_table.md"
   ps -eo pid,etimes,args | grep -E "ddplab|nvidia-cuda-mps" | grep -v grep || echo "nothing left running" ;;
5) part=full TAG=nccl2307 bash scripts/device/round_one_gpu.sh ;;
esac
