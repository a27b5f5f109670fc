#!/usr/bin/env bash
# Issue 13, reports across machines, on 4x H200 (the lead runs it; root, from the repository root):
#   bash scripts/device/x4_aggregate.sh
# 2 "machines" x 2 GPUs (network namespaces, scripts/device/netns_machines.py): storm and sweep, each
# machine's results.machines with the whole job, each machine alone (NVLink) and one rank per machine
# (NCCL's socket transport on the veth); then 4 machines x 1 GPU: pairwise, 6 pairs in 3 rounds.
# Confirms the change when: every launcher rc 0 (or 1 for a threshold), both reports carry ranks 0-3 with
# machines 10.9.0.1/10.9.0.2, the intra-machine rows show NVLink-class busbw (hundreds of GB/s at 256 MiB)
# and the inter-machine row socket-class busbw (a few GB/s), the NCCL lines say P2P inside a machine and
# NET/Socket between, pairwise names 6 pairs with no broken one, and nothing is left running.
source scripts/device/common.sh
machines() {  # machines NAME COUNT GPUS ARGS...: ddplab ARGS on COUNT machines of GPUS each
  local name=$1 count=$2 gpus=$3; shift 3
  local t0=$SECONDS
  $py scripts/device/netns_machines.py "$res/$name" "$count" "$gpus" "$@" > "$res/$name.log" 2>&1
  echo "$name: rc=$? $((SECONDS - t0))s :: ddplab $* on $count x $gpus"
  cat "$res/$name.log"
}
$py -c "import torch; print('torch', torch.__version__, 'gpus', torch.cuda.device_count(), 'nccl', torch.cuda.nccl.version())"
machines storm_2x2 2 2 storm --per-device --nproc 2 --iters 2000
machines sweep_2x2 2 2 sweep --per-device --nproc 2 --ops all_reduce -b 8 -e 256M -f 4
machines pairwise_4x1 4 1 pairwise --per-device --nproc 1 -b 8 -e 256M -f 16
leftovers
pack aggregate
