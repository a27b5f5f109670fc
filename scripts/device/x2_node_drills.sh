#!/usr/bin/env bash
# Issue 13, second part, on 2x H200: two "machines" as network namespaces, one GPU each, one ddplab launcher
# in each (scripts/device/netns_two_machines.py), NCCL between them. Every rank's status goes through the job's
# store, so both machines name a stall on the other one; kill_node and partition are named by the survivor;
# the same train under a fake srun needs no --nnodes/--rdzv-endpoint.
# Run from the repository root as root: bash scripts/device/x2_node_drills.sh
source scripts/device/common.sh
two() {  # two NAME ARGS...: ddplab ARGS on both machines
  local name=$1; shift
  local t0=$SECONDS
  $py scripts/device/netns_two_machines.py "$res/$name" "$@" > "$res/$name.log" 2>&1
  echo "$name: rc=$? $((SECONDS - t0))s :: ddplab $*"
  cat "$res/$name.log"
}
verdicts() {  # verdicts NAME: each machine's drills as its report says
  $py - "$res/$1" <<'PY'
import json, sys
from pathlib import Path
for i in (0, 1):
    path = Path(sys.argv[1]) / f"machine{i}.json"
    if not path.exists():
        print(f"machine{i}: no report"); continue
    for d in json.loads(path.read_text())["results"]["drills"]:
        print(f"machine{i} {d['drill']}: {d['verdict']} culprit {d['culprit_ranks']} on {d.get('culprit_hosts')} "
              f"by {d['detected_by']} in {d['detect_s']} s, leaked {d['leaked_pids']} ({d.get('role', '')})")
PY
}
$py -c "import torch; print('torch', torch.__version__, 'gpus', torch.cuda.device_count(), 'nccl', torch.cuda.nccl.version())"
two stall_nccl drill stall --per-device --nproc 1 --victim 1 --timeout 60 --hang-timeout 10
verdicts stall_nccl
two node_drills_nccl drill kill_node,partition --per-device --nproc 1 --timeout 60 --hang-timeout 10
verdicts node_drills_nccl
DDPLAB_AS_SRUN=1 two train_srun_nccl train --per-device --nproc 1 --steps 50
leftovers
pack node_drills
