#!/usr/bin/env bash
# 2x H200, for the lead to run: bash scripts/device/launch_loopback_x2.sh   (from the repository root)
# `ddplab launch` of a user's NCCL job on one machine listens on loopback only (docs/exposure.md, "`ddplab launch`"):
#  1. examples/healthy_mlp.py, one rank per GPU (NCCL), torch's default one-machine rendezvous (c10d, free port);
#  2. the same with a static rendezvous on --master-port 29511 (torch 2.11's default path);
#  3. NCCL_SOCKET_IFNAME=lo set by the user: kept ("(yours)" in the listened line), still loopback only.
# Expected: each run "command exit code 0; N listening socket(s), 0 beyond loopback", and its report's listen
# line "loopback only: rendezvous store 127.0.0.1:PORT; collectives NCCL_SOCKET_IFNAME=lo, GLOO_SOCKET_IFNAME=lo".
# Output: these lines, and $OUT/launch-loopback.tgz (logs and reports).
source scripts/device/common.sh
job() {  # job NAME [ddplab launch options...]: the healthy example under the listening-socket watcher
  local name=$1; shift
  $py scripts/device/listening_sockets.py launch --nproc-per-node 2 "$@" --out "$res/$name" -- \
    examples/healthy_mlp.py --steps 200 > "$res/$name.log" 2>&1
  echo "$name: rc=$? :: ddplab launch --nproc-per-node 2 $* -- examples/healthy_mlp.py --steps 200"
  grep -E "^listening|^command exit|listened:|MASTER" "$res/$name.log"
  $py -c "import json,sys; r=json.load(open(sys.argv[1]))['results']; print(r['outcome'], r['listen']['summary'])" \
    "$res/$name/report.json"
}
hostname; getent hosts "$(hostname)"  # what the collectives would bind without the pin
job launch_c10d_default
job launch_static --rdzv-backend static --master-port 29511
NCCL_SOCKET_IFNAME=lo job launch_user_ifname
leftovers
pack launch-loopback
