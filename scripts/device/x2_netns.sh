#!/usr/bin/env bash
# Issue 13 on 2x H200: two "machines" as network namespaces, one GPU each, one ddplab launcher in each
# (scripts/device/netns_two_machines.py): the store on 10.9.0.1 only, NCCL_SOCKET_IFNAME pinned to the
# veth, NCCL between the namespaces. Run from the repository root as root: bash scripts/device/x2_netns.sh
source scripts/device/common.sh
two() {  # two NAME ARGS...: ddplab ARGS on both machines
  local name=$1; shift
  local t0=$SECONDS
  $py scripts/device/netns_two_machines.py "$res/$name" "$@" > "$res/$name.log" 2>&1
  echo "$name: rc=$? $((SECONDS - t0))s :: ddplab $*"
  cat "$res/$name.log"
}
$py -c "import torch; print('torch', torch.__version__, 'gpus', torch.cuda.device_count(), 'nccl', torch.cuda.nccl.version())"
two train_nccl train --per-device --nproc 1 --steps 50 --model mlp
two storm_nccl storm --per-device --nproc 1 --iters 2000
two sweep_nccl sweep --per-device --nproc 1 --ops all_reduce -b 8 -e 64M -f 4
leftovers
pack netns
