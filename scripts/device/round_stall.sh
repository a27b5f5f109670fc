#!/usr/bin/env bash
# One H200, 2026-12-02: the image's torch and NCCL on main's code, then why the stall drill's blocking-wait run was
# never ended with NCCL 2.30.7 (docs/RESULTS.md, "Issues 17-18 on one H200, last round"). NCCL 2.30.7 travels in
# four parts, one per call, back to back while the machine stays warm (measured.md, "How NCCL 2.30.7 was loaded"):
#   step=1  part0; the full profile with the stock NCCL, then the SIGKILL test      (round_one_gpu.sh part=full)
#   step=2  part1; ddplab check once
#   step=3  part2; ddplab env
#   step=4  part3; NCCL 2.30.7 joined and copied in; plain torch's blocking wait while a peer stalls
#           (stall_probe.py, with and without a thread polling the flight recorder), then `ddplab drill stall`
#           sampled every 10 s (processes, kernel wait channels, faulthandler stacks, status files) and stopped
#           by SIGINT after 80 s if it has not ended
set -u
mkdir -p /tmp/nccl /tmp/r
n=$(( ${step} - 1 ))
[ -f .nccl/part$n ] && cp .nccl/part$n /tmp/nccl/ && echo "part$n kept in /tmp/nccl"
join() {
  cat /tmp/nccl/part0 /tmp/nccl/part1 /tmp/nccl/part2 /tmp/nccl/part3 | python3 -c "import lzma, sys; sys.stdout.buffer.write(lzma.decompress(sys.stdin.buffer.read()))" > /tmp/nccl/libnccl.so.2
  echo "618968ee277041751512e619190132a9bdf351c3ce7129c73484f6ef441ad692  /tmp/nccl/libnccl.so.2" | sha256sum -c
}
sample() {  # sample NAME: what the drill's processes are doing now
  echo "=== $1 at $(date +%T)"
  ps -eo pid,ppid,stat,wchan:28,etimes,pcpu,args | grep -E "ddplab|drills|nvidia-cuda-mps" | grep -v -E "grep|round_stall"
  for rank_pid in $(pgrep -f "ddplab.job.boot|drills/script.py|drills.script"); do
    echo "--- threads of $rank_pid"; for t in /proc/$rank_pid/task/*; do echo "$(basename $t) $(cut -d' ' -f3 $t/stat) $(cat $t/wchan) $(cat $t/comm)"; done | sort -k4 | uniq -c -f1 | head -20
    kill -s SIGRTMIN+4 $rank_pid 2>/dev/null  # faulthandler: every thread's Python stack into the rank's fatal.txt
  done
}
drill() {  # drill NAME ARGS: ddplab drill stall, sampled, SIGINT after 80 s
  local name=$1; shift
  local start=$(date +%s)
  python3 -m ddplab drill stall --hang-timeout 10 --victim 1 --run-dir /tmp/r/$name --json /tmp/r/$name.json "$@" > /tmp/r/$name.log 2>&1 &
  local pid=$!
  for i in 1 2 3 4 5 6 7 8; do sleep 10; kill -0 $pid 2>/dev/null || break; sample "$name $((i * 10)) s" >> /tmp/r/$name.samples; done
  kill -0 $pid 2>/dev/null && { echo "$name: still running after 80 s: SIGINT"; kill -INT $pid; }
  for i in $(seq 30); do kill -0 $pid 2>/dev/null || break; sleep 1; done
  kill -0 $pid 2>/dev/null && { echo "$name: still running 30 s after SIGINT"; sample "$name after SIGINT" >> /tmp/r/$name.samples; }
  wait $pid; echo "$name: rc=$? in $(( $(date +%s) - start )) s"; tail -4 /tmp/r/$name.log
}
case $step in
1) part=full TAG=stock bash scripts/device/round_one_gpu.sh; which gdb py-spy pstack 2>&1 | head -3 ;;
2) python3 -m pip install -q --no-index --no-build-isolation --no-deps -e . >/dev/null 2>&1
   start=$(date +%s); timeout 120 python3 -m ddplab check --out /tmp/r/check --format nagios > /tmp/r/check.log 2>&1
   echo "check: rc=$? in $(( $(date +%s) - start )) s"; head -3 /tmp/r/check.log; cp /tmp/r/check/report.json "$OUT/check_report.json" ;;
3) python3 -m pip install -q --no-index --no-build-isolation --no-deps -e . >/dev/null 2>&1; python3 -m ddplab env 2>&1 | tail -12 ;;
4) join || exit 1
   NCCL=/tmp/nccl/libnccl.so.2 part=none TAG=nccl2307 bash scripts/device/round_one_gpu.sh
   export NCCL_MULTI_RANK_GPU_ENABLE=1 PYTHONUNBUFFERED=1 LD_PRELOAD=/tmp/nccl/libnccl.so.2 NCCL_DEBUG=WARN
   port=29611
   for variant in "1 " "1 --poll" "0 --poll"; do
     set -- $variant; port=$((port + 1)); log=/tmp/r/probe_bw$1${2:-}.log
     echo "=== probe: TORCH_NCCL_BLOCKING_WAIT=$1 ${2:-}"
     TORCH_NCCL_BLOCKING_WAIT=$1 timeout 60 torchrun --nproc-per-node 2 --master-port $port scripts/device/stall_probe.py ${2:-} > $log 2>&1
     echo "rc=$?"; grep -E "rank [01]:" $log | grep -v beat | head -12; echo "last beat of rank 0: $(grep 'rank 0: beat' $log | tail -1)"
     grep -i -E "timed out|timeout|error" $log | grep -v "rank [01]:" | head -5; pkill -f stall_probe.py; sleep 2
   done
   drill stall_mps
   drill stall_nomps --no-mps
   (cd /tmp/r && tar czf "$OUT/stall_runs.tgz" stall_mps stall_nomps stall_mps.* stall_nomps.* probe_*.log 2>/dev/null)
   ps -eo pid,etimes,args | grep -E "ddplab|drills|stall_probe|nvidia-cuda-mps" | grep -v -E "grep|round_stall" || echo "nothing left running" ;;
5) export NCCL_MULTI_RANK_GPU_ENABLE=1 PYTHONUNBUFFERED=1 LD_PRELOAD=/tmp/nccl/libnccl.so.2
   ps -eo pid,etimes,args | grep -E "ddplab|drills|nvidia-cuda-mps" | grep -v -E "grep|round_stall"
   for pipe in $(find /tmp/r -type d -name pipe); do echo quit | CUDA_MPS_PIPE_DIRECTORY=$pipe nvidia-cuda-mps-control && echo "quit sent to $pipe"; done
   sleep 3; pkill -f "ddplab|drills.script"; sleep 2
   ps -eo pid,etimes,args | grep -E "ddplab|drills|nvidia-cuda-mps" | grep -v -E "grep|round_stall" || echo "nothing left running"
   rm -rf /tmp/r/stall_mps*; drill stall_mps
   (cd /tmp/r && tar czf "$OUT/stall_mps.tgz" stall_mps stall_mps.* 2>/dev/null)
   ps -eo pid,etimes,args | grep -E "ddplab|drills|nvidia-cuda-mps" | grep -v -E "grep|round_stall" || echo "nothing left running" ;;
esac
