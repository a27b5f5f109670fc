#!/usr/bin/env bash
# One GPU, the image's torch (2.11 with its NCCL), 2026-12-06 session 11, after the static rendezvous' wait moved to a
# helper thread (supervision/elastic.py): every launch goes through that code.
#   1. a stop while elastic waits for other machines (static and c10d rendezvous, exit barrier), on the image's torch
#      (the exit barrier's test finds the launcher there with py-spy, when the image has it)
#   2. the full lab profile (round_one_gpu.sh part=full: PASS, then the SIGKILL test)
#   3. ddplab check once more
set -u
export PYTHONUNBUFFERED=1
mkdir -p /tmp/r
python3 -m pip install -q --no-index --no-build-isolation --no-deps -e . > /tmp/pip.log 2>&1 || echo "pip failed"
python3 -c "import torch; print('torch', torch.__version__)"
timeout 240 python3 -m pytest -q -p no:cacheprovider -o addopts= tests/integration/test_machine_waits.py 2>&1 | tail -4
echo "py-spy: $(command -v py-spy || echo none)"
part=full TAG=s11 bash scripts/device/round_one_gpu.sh 2>&1 | grep -v -i whl
start=$(date +%s%3N)
python3 -m ddplab check --out /tmp/r/check --format nagios --json "$OUT/check_report.json" > /tmp/r/check.nagios 2>/tmp/r/check.log
echo "check: rc=$? wall $(( $(date +%s%3N) - start )) ms"; head -c 300 /tmp/r/check.nagios; echo
ps -eo pid,ppid,etimes,args | grep -E "ddplab|nvidia-cuda-mps|torchrun" | grep -v -E "grep|defunct" || echo "nothing left running"
