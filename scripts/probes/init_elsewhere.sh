#!/usr/bin/env bash
# One machine of a job across machines whose ranks all wait in init_process_group, on real training code: two
# launchers on torch's static rendezvous (127.0.0.1), 2+2 ranks, --hang-timeout 5. Node 0's ranks sleep before any
# framework code and never reach init; node 1 runs the training code named. Node 1's judge should name ranks 0 and
# 1, kind never-reached-init (docs/supervision.md, rule 6); node 0 is then stopped (exit 130).
#
#   bash scripts/probes/init_elsewhere.sh OUT MODULE [ARGS...]
#   e.g. MODULE ddplab.drills.lightning_job, ddplab.drills.accelerate_job, ddplab.drills.script --wrap fsdp2
set -u
out=$1; module=$2; shift 2
mkdir -p "$out"
printf 'import time\ntime.sleep(300)  # never reaches init_process_group\n' > "$out/never.py"
port=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
common=(--nnodes 2 --master-addr 127.0.0.1 --master-port "$port" --nproc-per-node 2 --hang-timeout 5)
python3 -m ddplab launch "${common[@]}" --node-rank 0 --out "$out/node0" "$out/never.py" > "$out/node0.log" 2>&1 &
node0=$!
started=$(date +%s%3N)
python3 -m ddplab launch "${common[@]}" --node-rank 1 --out "$out/node1" -m "$module" "$@" > "$out/node1.log" 2>&1
rc1=$?
took_ms=$(( $(date +%s%3N) - started ))
kill -TERM "$node0"; wait "$node0"; rc0=$?
python3 - "$out/node1/report.json" "$module${*:+ $*}" "$rc1" "$rc0" "$took_ms" <<'PY'
import json, sys
path, code, rc1, rc0, took_ms = sys.argv[1:]
doc = json.load(open(path))
culprit = doc["results"]["culprit"] or {}
print(f"{code}: node 1 exit {rc1} in {int(took_ms) / 1000:.1f} s, {doc['results']['outcome']}, culprit "
      f"{culprit.get('ranks')} ({culprit.get('kind')}); node 0 exit {rc0}")
PY
