#!/usr/bin/env bash
# 2x H200: where a one-machine run listens (NCCL one rank per GPU, gloo/NCCL on one shared GPU),
# and that planted secrets stay out of `env` (docs/exposure.md).
source scripts/device/common.sh
sockets() {  # sockets NAME ARGS...: ddplab ARGS under the listening-socket watcher
  local name=$1; shift
  $py scripts/device/listening_sockets.py "$@" --json "$res/$name.json" > "$res/$name.log" 2>&1
  echo "$name: rc=$? :: ddplab $*"; grep -E "^listening|^command exit" "$res/$name.log"
  $py -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['verdict'], d['results']['listen']['summary'])" "$res/$name.json"
}
RANKING_API_KEY=rk-planted-0001 GLOO_TOKEN=planted-0002 NCCL_DEBUG_FILE='/tmp/x?token=UGxhbnRlZFNlY3JldEJsb2IwMDA0' \
  step env_secrets env
grep -c -E "planted|UGxhbnRlZFNlY3JldEJsb2IwMDA0" "$res/env_secrets.json" "$res/env_secrets.log"
grep "where a one-machine run listens" "$res/env_secrets.log"
sockets train_2gpu_nccl train --per-device --nproc 2 --steps 200
sockets train_shared_gpu0 train --share-device --nproc 2 --steps 200
sockets storm_2gpu_nccl storm --per-device --nproc 2 --iters 2000
NCCL_SOCKET_IFNAME=lo step train_user_ifname train --per-device --nproc 2 --steps 20
leftovers
pack exposure
